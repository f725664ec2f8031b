// tools/dlcc.c — the `dlcc` command line: check, fmt, compile, run, train, import.
//
// The only place that prints and chooses exit codes (STYLE.md 3.3). Library calls report into a
// dl_diags sink; each command renders it with dl_diags_render to stderr. Exit codes:
//   0 success, 1 invalid input (bad model, bad .npy, shape error, ...), 2 bad usage (unknown
//   command or flag, missing or malformed argument), 3 internal error (out of memory, an
//   artifact the compiler made that does not load), 4 training diverged (`dlcc train`, `dlcc run
//   --entry train_step`: --max-skipped-steps consecutive non-finite steps).
// Commands parse all of their arguments before touching any file, so a usage error never has
// side effects. Files are written only after everything succeeded, atomically (temporary file
// + rename), so a failed command never leaves a partial or half-updated output behind.
#include "dlcc.h"

#include "cli.h"
#include "dl_cg.h"
#include "dl_fe.h"
#include "dl_idx.h"
#include "dl_ir.h"
#include "dl_json.h"
#include "dl_pass.h"
#include "dl_safetensors.h"
#include "dl_tensor_io.h"
#include "dlrt.h"
#include "dlrt_format.h"
#include "load_map.h"
#include "plot.h"
#include "train_watch.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef DL_VERSION
#    define DL_VERSION "0.0.0"
#endif
#ifndef DL_GIT_REV
#    define DL_GIT_REV "unknown"
#endif

// ---------------------------------------------------------------------------------------------
// Help texts

static const cli_help helps[] = {
    {"check", "parse and type-check models", "dlcc check [-v] [--verify-each] FILE...",
     "Parses each FILE, infers shapes and verifies the graph, then runs the pass pipeline up to\n"
     "the back end (autodiff, precision, simplify, fusion: a train block is checked by deriving\n"
     "its training graph). Prints every diagnostic to stderr and exits 1 if any file has an\n"
     "error; quiet on success.\n"
     "\n"
     "  -v, --verbose   print 'FILE: ok (N nodes, M params)' for each good file\n"
     "  --verify-each   verify the IR after every pass (always on in debug builds)\n",
     NULL},
    {"fmt", "print a model in canonical layout",
     "dlcc fmt [--check] FILE... | dlcc fmt FILE [-o OUT]",
     "Parses FILE and prints it in the canonical .dlg layout to stdout, or atomically to OUT.\n"
     "A file with errors prints its diagnostics, exits 1 and leaves OUT untouched.\n"
     "\n"
     "  -o, --output OUT   write to OUT instead of stdout (OUT may be FILE itself)\n"
     "  --check            write nothing; list the files that are not formatted and exit 1\n"
     "                     if there are any\n",
     NULL},
    {"compile", "compile a model to a native artifact (.so)",
     "dlcc compile FILE [-D NAME=INT]... [-o OUT.so] [--target NAME] [--cpu NAME]\n"
     "                    [--features F] [-O N] [--no-cache] [--cache-dir DIR]\n"
     "                    [--dump-after PASS|all] [--verify-each] [--no-prepack] [-v]\n"
     "dlcc compile --target [list]",
     "Compiles FILE (its infer entry point, and train_step when it has a train block) to\n"
     "native code for this machine through LLVM and\n"
     "writes the artifact, an ELF shared object loadable by libdlrt, atomically to OUT\n"
     "(default: FILE with .so instead of .dlg). A failed compile leaves no file behind.\n"
     "Artifacts are kept in the compilation cache ($DLCC_CACHE_DIR, else $XDG_CACHE_HOME/dlcc,\n"
     "else ~/.cache/dlcc): the same model, dims, options, target and compiler are compiled once.\n"
     "A cache that cannot be used gives one warning; the compile goes on without it.\n"
     "DLCC_CACHE=0 turns the cache off (as --no-cache); DLCC_CACHE_READONLY=1 (or a cache\n"
     "directory or database you cannot write) makes it read-only: hits are used, a miss is\n"
     "compiled and not stored (docs/cache.md).\n"
     "\n"
     "  -D NAME=INT        bind dim NAME (e.g. -D N=64)\n"
     "  -o, --output OUT   where to write the artifact\n"
     "  --target NAME      x86-64 (the default) or cuda:sm_XX (an NVIDIA GPU, e.g. cuda:sm_90);\n"
     "                     --target alone (or list) lists the targets\n"
     "  --cpu NAME         target CPU (LLVM name, e.g. skylake-avx512; default: this machine)\n"
     "  --features F       LLVM target features, e.g. +avx2,-avx512f (default: the CPU's)\n"
     "  -O N               optimisation level 0-3 (default 3)\n"
     "  --no-cache         neither read nor write the compilation cache\n"
     "  --cache-dir DIR    use the cache in DIR (default: see above)\n"
     "  --dump-after PASS  print the IR after pass PASS of the pipeline (shapes, autodiff,\n"
     "                     precision, simplify, fusion, memplan, schedule), or after each with\n"
     "                     'all', to stdout as .dlg text that 'dlcc check' reads back; the\n"
     "                     cache is not looked up (docs/passes.md)\n"
     "  --verify-each      verify the IR after every pass (always on in debug builds)\n"
     "  --no-prepack       pack weights at every infer call instead of once per change of\n"
     "                     the params (saves a copy of the packed weights per session)\n"
     "  -v, --verbose      print 'cache hit|miss KEY (N.N ms)', the target, sizes and times\n",
     NULL},
    {"run", "run a model's infer or train_step entry point",
     "dlcc run FILE [-D NAME=INT]... [--in NAME=PATH.npy]... [--out NAME=PATH.npy]...\n"
     "                [--params CKPT.safetensors [--map FILE] [--normalize none]]\n"
     "                [--backend cpu|ref] [--entry infer]\n"
     "       dlcc run FILE --entry train_step [--steps K] [--in NAME=PATH.npy]...\n"
     "                [--params IN.safetensors] [--save-params OUT.safetensors]\n"
     "                [--max-skipped-steps N] [--detect-anomaly]",
     "Runs FILE, a .dlg model or an artifact compiled by 'dlcc compile', on the given inputs.\n"
     "A .dlg is compiled on the fly for --backend cpu (the default; through the compilation\n"
     "cache, as 'dlcc compile'; see --no-cache, --cache-dir, -v below) or evaluated by the\n"
     "reference evaluator with --backend ref. Inputs are given with --in, as .npy files of the\n"
     "input's dtype and shape (bfloat16 travels as '<u2'). The infer entry point needs only the\n"
     "inputs the outputs asked for depend on: with --out probs=P.npy a classifier runs without\n"
     "its labels (the other outputs are not computed); without --out, the outputs whose inputs\n"
     "were all given are printed. An input an asked-for output needs is an error naming it.\n"
     "With --out, writes the named outputs as .npy files (atomically, and only after the whole\n"
     "evaluation succeeded); without --out, prints each output's type and first values.\n"
     "Compiled runs also take --threads T, --profile FILE, --profile-summary and --ftz (below).\n"
     "\n"
     "  -D NAME=INT          bind dim NAME (e.g. -D N=64)\n"
     "  --in NAME=PATH       read input NAME from a .npy file\n"
     "  --out NAME=PATH      write output NAME to a .npy file\n"
     "  --params PATH        the params from a safetensors checkpoint (e.g. written by\n"
     "                       --save-params or dlcc train); every param must be in it, other\n"
     "                       tensors (optimizer state) are ignored by --entry infer; the\n"
     "                       inputs 'dlcc train' normalised are normalised with the values\n"
     "                       stored in it (a notice on stderr says which and how)\n"
     "  --map FILE           rename the checkpoint's tensors to the model's names (e.g. a\n"
     "                       PyTorch state_dict): one rule per line, 'FROM TO', or a prefix\n"
     "                       rule 'encoder.* enc.*'; '#' comments (docs/training.md)\n"
     "  --normalize none     do not reapply the checkpoint's normalisation (the inputs are\n"
     "                       given normalised already)\n"
     "  --backend cpu        compiled native code (default)\n"
     "  --backend ref        the reference evaluator (the oracle; .dlg models only)\n"
     "  --entry infer        the inference entry point (default)\n"
     "  --entry train_step   K training steps (forward, backward, optimizer update) of a model\n"
     "                       with a train block, compiled (--backend cpu); see below\n"
     "  --no-cache           compile without the compilation cache (--backend cpu)\n"
     "  --cache-dir DIR      use the cache in DIR\n"
     "  -v, --verbose        print 'cache hit|miss KEY (N.N ms)' for a compiled .dlg, and with\n"
     "                       --entry train_step the mean time per step\n"
     "  --threads T          threads of the compiled run, 1..256 (default: $DLRT_THREADS, else\n"
     "                       the number of cores); results are identical for every T\n"
     "  --profile FILE       write a Chrome trace-event JSON profile of the compiled run (one\n"
     "                       row per thread, one event per kernel; also $DLRT_PROFILE=FILE)\n"
     "  --profile-summary    print the top kernels by total time and their share of the step\n"
     "                       (stderr)\n"
     "  --ftz                flush denormal floats to zero during the compiled run (x86 MXCSR\n"
     "                       FTZ + DAZ): faster where values underflow, not IEEE-exact there\n",
     "\n"
     "With --entry train_step each --in file either has exactly the input's shape (the same\n"
     "batch every step) or one extra leading dim of size >= K (step i uses slice i); the dtype\n"
     "must match (nothing is converted). Prints one line per step to stdout:\n"
     "  step I loss L grad_norm G skipped 0|1\n"
     "\n"
     "  --steps K            number of train steps (default 1)\n"
     "  --params PATH        load params (and optimizer state, if present) from a safetensors\n"
     "                       checkpoint before the first step (--init-params is the same;\n"
     "                       --map FILE renames its tensors as above)\n"
     "  --save-params PATH   write a safetensors checkpoint (params, optimizer state, step)\n"
     "                       atomically after the last step\n"
     "  --max-skipped-steps N  stop with exit status 4 after N non-finite steps in a row (or\n"
     "                       with < N finite steps between them; default 10; 0: never stop)\n"
     "                       and save nothing; see 'dlcc help train'\n"
     "  --detect-anomaly     at the first non-finite step, say where its first non-finite\n"
     "                       value appears (a .dlg model; see 'dlcc help train')\n"},
    {"train", "train a model on a data set (Fashion-MNIST, IDX or .npy files)",
     "dlcc train MODEL.dlg --dataset SPEC [--test SPEC] [--epochs E] [--batch N] [--threads T]\n"
     "                  [--save CKPT] [--init CKPT [--map FILE]] [--lr V] [--lr-schedule NAME]\n"
     "                  [--warmup-steps S] [--seed S] [--limit-train N] [-D NAME=INT]...\n"
     "                  [--max-skipped-steps N] [--detect-anomaly] [--comm auto|mpi|none]\n"
     "                  [--deterministic R] [--sync-bn]\n"
     "                  [--log FILE.jsonl|FILE.csv] [--log-every N] [--save-every N|Ts|Tm|Th]\n"
     "                  [--resume CKPT] [--no-cache] [--cache-dir DIR] [--dry-run] [-v]\n"
     "       dlcc train MODEL.dlg --data NAME=FILE... [--test-data NAME=FILE...]\n"
     "                  [--normalize NAME[=per-channel|global] | none]... [the options above]",
     "Trains MODEL.dlg (a `train` block). --dataset: two inputs, the data (float[B, ...], B\n"
     "a named dim: the batch) and the labels (int64[B] or int32[B]); --data: any inputs, each\n"
     "by name, every first dim the batch. The\n"
     "model is compiled through the compilation cache with B bound to --batch. Each epoch\n"
     "visits the training set in a new seeded random order, in full batches (the final\n"
     "partial batch of an epoch is dropped), one compiled train step per batch. Batches come\n"
     "from the runtime's data loader: producer threads fill a ring of batch slots ahead of\n"
     "the step, which reads each slot in place (no copy). Then the\n"
     "infer entry point classifies the test set: the argmax of the model's first float\n"
     "output of shape [B, C] is compared with the label. The checkpoint is written last,\n"
     "atomically; a failed run writes nothing.\n"
     "\n"
     "Data: --dataset's default: uint8 pixels / 255, then the training samples' mean and std\n"
     "per channel (printed; --normalize none: off); values must be finite. A sample's\n"
     "element count must equal the data input's per-sample count (784 for Fashion-MNIST,\n"
     "whatever the input's shape, e.g. [N, 784] or [N, 1, 28, 28]).\n"
     "\n"
     "Output: per epoch 'epoch E: mean loss L, T s, S samples/s, skipped K, data wait W\n"
     "ms/batch' (stdout; W: the mean time a step waited for its batch), and\n"
     "at the end 'test loss: L (mean over S samples)' (when the loss is a model output) and,\n"
     "for classifiers, 'test accuracy: A (CORRECT/TOTAL)'. Progress goes to stderr: one line\n"
     "rewritten in place on a terminal, else one line per epoch.\n"

     "\n"
     "  --dataset SPEC       fashion-mnist (Debian's dataset-fashion-mnist package, in\n"
     "                       /usr/share/datasets/fashion-mnist; its t10k set is the test set),\n"
     "                       fashion-mnist:DIR (the four IDX files in DIR),\n"
     "                       idx:IMAGES,LABELS (IDX files, plain or gzip), or\n"
     "                       npy:X.npy,Y.npy (X [S, ...] float32/64, uint8 or an int type,\n"
     "                       Y [S] of an int type)\n"
     "  --test SPEC          the test set for idx: and npy: data sets (same kind); without\n"
     "                       it there is no test accuracy\n"

     "  --epochs E           passes over the training set (default 1)\n"
     "  --batch N            batch size: binds the batch dim (default: its value in the model)\n"
     "  --threads T          threads of each step, 1..256 (default: $DLRT_THREADS, else the\n"
     "                       number of cores); the results are identical for every T\n"
     "  --profile FILE       write a Chrome trace-event JSON profile of the training and test\n"
     "                       steps (one row per thread, one event per kernel)\n"
     "  --profile-summary    print the top kernels by total time and their share of the step\n"
     "                       (stderr, at the end)\n"
     "  --ftz                flush denormal floats to zero in every step (x86 MXCSR FTZ + DAZ):\n"
     "                       faster once training underflows into denormals (a memorised batch),\n"
     "                       not IEEE-exact there\n"
     "  --save CKPT          write a safetensors checkpoint (params, optimizer state, step,\n"
     "                       the loop's position) at the end, atomically\n"
     "  --init CKPT          start from a checkpoint or a params-only safetensors file\n"
     "  --map FILE           rename --init's tensors: 'FROM TO' per line (docs/training.md)\n"
     "  --lr V               base learning rate (default: the model's optimizer lr)\n"
     "  --lr-schedule NAME   constant (default); step: x0.1 at 50% and again at 75% of the\n"
     "                       steps; cosine: lr/2 (1 + cos(pi t/T)); warmup-cosine: lr (t+1)/S\n"
     "                       for the first S steps, then cosine; one-cycle: PyTorch's\n"
     "                       OneCycleLR with its defaults, V as its max_lr\n"
     "  --warmup-steps S     warm-up steps of warmup-cosine (default 5% of the steps)\n"
     "  --seed S             seed of the shuffling (default 0)\n"
     "  --loader-threads P   data loader producer threads, 1..256 (default 1: they only copy\n"
     "                       rows of the data read up front)\n"
     "  --prefetch K         batch slots of the loader's ring, 2..1024 (default 4): how many\n"
     "                       batches are made ahead of the step\n",
     "  --limit-train N      use only the first N training samples\n"
     "  --data NAME=FILE     input NAME's .npy [S, ...], S samples (one per input)\n"
     "  --test-data NAME=FILE  the test set, one per input\n"
     "  --normalize NAME[=per-channel|global]  standardise float input NAME (stored in the\n"
     "                       checkpoint, reapplied by --init / --resume); none: off\n"
     "  --max-skipped-steps N  stop after N non-finite steps in a row, or N with fewer than N\n"
     "                       finite steps between any two (default 10: a passing bad batch is\n"
     "                       over long before; 0: never stop)\n"
     "  --detect-anomaly     at the first non-finite step, replay it (same batch, params from\n"
     "                       before it) in the reference evaluator and name the first node\n"
     "                       whose output is non-finite: op, output, FILE:LINE:COL (and the\n"
     "                       ranges of its inputs); copies the params before every step\n"
     "  --log FILE           a metrics log: JSON Lines (FILE.jsonl) or CSV with a header\n"
     "                       (FILE.csv); a record per step (step, epoch, loss, lr, grad_norm,\n"
     "                       skipped, samples_per_s, time_s) and one per test (eval_loss,\n"
     "                       eval_accuracy); flushed at each epoch end ('dlcc plot' draws it)\n"
     "  --log-every N        a step record every N steps (default 1)\n"
     "  --save-every N|Ts|Tm|Th  also write --save every N steps, or every T seconds,\n"
     "                       minutes or hours, during training (atomically)\n"
     "  --resume CKPT        go on with a run from its checkpoint: params, optimizer state,\n"
     "                       step, the data order and position, the schedule; the losses are\n"
     "                       those of a run never stopped (same model, batch, data, epochs)\n"
     "  -D NAME=INT          bind a dim, as for 'dlcc compile'\n"
     "  --no-cache           compile without the compilation cache\n"
     "  --cache-dir DIR      use the cache in DIR\n"
     "  --dry-run            check the arguments, model and data, print the plan (each epoch's\n"
     "                       first samples, each step's lr) and exit without compiling\n"
     "  -v, --verbose        print the data statistics, the plan and the cache line\n"
     "  --comm MODE          data parallelism over MPI: mpi, none, or auto (the default: mpi\n"
     "                       when started by mpirun with more than one rank). Under\n"
     "                       'mpirun -np R dlcc train ...' each rank trains on its shard of every\n"
     "                       epoch with --batch N, and each step averages the gradients of the\n"
     "                       R ranks (a global batch of R x N); rank 0 alone prints the progress\n"
     "                       and epoch lines (the global batch's loss; samples/s of all ranks),\n"
     "                       tests and writes --save; --init is read by rank 0 and sent to all\n"
     "  --deterministic R    one process, the params of R ranks bit for bit: --batch is the\n"
     "                       global batch, run as R chunks (under mpirun: checks R = ranks)\n"
     "  --sync-bn            BatchNorm uses the global batch's statistics (sync_batchnorm)\n"
     "\n"
     "Divergence: a step is non-finite when its loss is NaN or Inf or its update was skipped\n"
     "(a non-finite gradient; params unchanged). The first one gets a warning naming its step,\n"
     "epoch and batch. After N = --max-skipped-steps of them in a row, or N with fewer than N\n"
     "finite steps between any two (blown-up params alternate non-finite steps with huge\n"
     "finite ones), training stops with exit status 4 and the checkpoint is not written.\n"
     "Ctrl-C (SIGINT) or SIGTERM: the step under way finishes, the checkpoint is written\n"
     "atomically (to --save, else MODEL.interrupted.safetensors beside the model), the\n"
     "command that resumes is printed, and dlcc exits with status 130 (SIGINT) or 143\n"
     "(SIGTERM); a second Ctrl-C ends it at once. Not under mpirun (use --save-every).\n"
     "With dynamic loss scaling a skipped step\n"
     "with a finite loss is the scaler backing off and counts only once the scale is <= 1.\n"
     "A finite loss is never judged, however large. Non-finite values in the data are an\n"
     "error (exit 1) before training.\n"},
    {"plot", "draw a training log (dlcc train --log) as an SVG file",
     "dlcc plot LOG.jsonl|LOG.csv [-o OUT.svg] [--title TEXT]",
     "Draws the log that 'dlcc train --log' wrote (JSON Lines or CSV, by its suffix) as one\n"
     "SVG file that any browser opens (no script, font or other file needed): the training\n"
     "loss per step (solid, left axis), the learning rate (dashed, right axis), the test\n"
     "evaluations (dots at their loss, labelled with their accuracy), axes with ticks and\n"
     "labels, and the log's file name as the title. A step logged again by a resumed run\n"
     "replaces the earlier records from that step on; a log of more than 4000 steps is drawn\n"
     "with each run of N steps averaged into one point. A missing, empty or malformed log is\n"
     "an error naming the file and line (exit 1), and nothing is written.\n"
     "\n"
     "  -o, --output OUT     write the SVG to OUT, atomically (default: stdout)\n"
     "  --title TEXT         the title (default: the log's file name)\n",
     NULL},
    {"explain", "why two models get the same or different cache keys",
     "dlcc explain A.dlg B.dlg [-D NAME=INT]... [--cpu NAME] [--features F] [-O N] [--json]",
     "Loads both models with the same options and prints both cache keys and, for each key\n"
     "component (ir, dims, options, target, format, compiler), 'same' or 'differs'. When the\n"
     "IR differs, prints the first node that differs with its line in both files, and any\n"
     "difference in inputs, params, outputs, node count and train block. Exits 0 whether or\n"
     "not the keys differ, 1 if a model has an error. ('dlcc-cache explain' runs this.)\n"
     "\n"
     "  -D NAME=INT        bind dim NAME in both models\n"
     "  --cpu NAME         target CPU (default: this machine)\n"
     "  --features F       LLVM target features (default: the CPU's)\n"
     "  -O N               optimisation level 0-3 (default 3)\n"
     "  --json             machine-readable output (one JSON document on stdout)\n",
     NULL},
    {"import", "convert an ONNX model to .dlg",
     "dlcc import MODEL.onnx [-o OUT.dlg] [--consts] [--inline-weights] [-v]\n"
     "                   [--train-loss cross_entropy|mse [--labels NAME] [--optimizer OPT]\n"
     "                   [--lr V] [--output-name OUT]]",
     "Imports an ONNX model (opsets 1-21) and prints it as .dlg text to stdout or atomically\n"
     "to OUT. The text is checked as 'dlcc check' would check it before anything is written.\n"
     "With -o, params of more than 1024 values go to OUT's .safetensors beside it (OUT.dlg\n"
     "-> OUT.safetensors, read through file(...) initialisers; hashed by content for the\n"
     "cache key). Errors exit 1 and write nothing.\n"
     "\n"
     "  -o, --output OUT   write to OUT instead of stdout\n"
     "  --consts           turn initializers into consts instead of params\n"
     "  --inline-weights   keep every param's values in the .dlg text\n"
     "  --train-loss LOSS  make it trainable: append a labels input, the loss of the first\n"
     "                     output (cross_entropy: SoftmaxCrossEntropyLoss over logits [N, C,\n"
     "                     ...] and int64 labels; mse: MeanSquaredError against a target of\n"
     "                     the output's type), `output loss` and a train block\n"
     "  --labels NAME      the labels input (default labels, or target for mse)\n"
     "  --optimizer OPT    sgd, adam (default), adamw or rmsprop\n"
     "  --lr V             the learning rate (default: the optimizer's)\n"
     "  --output-name OUT  the output the loss reads (default: the first)\n"
     "  -v, --verbose      print notes on what the import changed (such as initializers that\n"
     "                     the exporter merged and that became separate params)\n",
     NULL},
};

static void print_main_help(FILE *f) {
    fprintf(f, "dlcc %s — a compiler for deep-learning training graphs\n\n", DL_VERSION);
    fprintf(f, "usage: dlcc COMMAND [ARGS...]\n\ncommands:\n");
    cli_print_commands(f);
    fprintf(f, "\noptions:\n  -h, --help     show this help\n  --version      show the version\n");
    fprintf(f, "\nexit status: 0 success, 1 invalid input, 2 bad usage, 3 internal error (such as "
               "out of memory), 4 training diverged, 130 / 143 training interrupted by SIGINT / "
               "SIGTERM (dlcc train: checkpoint written)\n");
}

// Splits "NAME=VALUE": NAME must be non-empty. Returns false on a malformed argument.
static bool split_assign(const char *arg, char *name, size_t name_size, const char **value) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || (size_t)(eq - arg) >= name_size) {
        return false;
    }
    memcpy(name, arg, (size_t)(eq - arg));
    name[eq - arg] = 0;
    *value = eq + 1;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Diagnostics and loading

// An error about a whole file (no line): registered so it renders as "PATH: error: MSG".
static void file_diag(dl_diags *d, const char *path, const char *fmt, ...) DL_PRINTF(3, 4);
static void file_diag(dl_diags *d, const char *path, const char *fmt, ...) {
    uint32_t id = 0;
    dl_src_loc loc = DL_NO_LOC;
    if (dl_diags_add_file(d, path, "", 0, &id) == DL_OK) {
        loc.file = id;
    }
    va_list ap;
    va_start(ap, fmt);
    dl_vdiag(d, DL_SEV_ERROR, loc, fmt, ap);
    va_end(ap);
}

// Parses, binds dims, infers shapes and verifies. On failure everything is in `d`.
typedef struct bind {
    char name[128];
    int64_t value;
} bind;

// -D NAME=INT into *out; a usage error (exit 2) otherwise.
static int parse_define(const char *cmd, const char *val, bind *out) {
    const char *num;
    char *end = NULL;
    memset(out, 0, sizeof *out);
    if (!split_assign(val, out->name, sizeof out->name, &num)) {
        return cli_usage_error(cmd, "-D expects NAME=INT, got '%s'", val);
    }
    errno = 0;
    long long v = strtoll(num, &end, 10);
    if (*num == 0 || *end != 0 || errno == ERANGE) {
        return cli_usage_error(cmd, "-D %s: '%s' is not an integer", out->name, num);
    }
    out->value = v;
    return EXIT_OK;
}

// Fills o->binds from the CLI's -D list (borrowing the names); the caller frees *out_binds.
static bool options_set_binds(dlcc_options *o, const bind *binds, size_t n_binds,
                              dlcc_bind **out_binds) {
    *out_binds = NULL;
    o->binds = NULL;
    o->n_binds = 0;
    if (n_binds == 0) {
        return true;
    }
    dlcc_bind *bs = dl_mem_calloc(n_binds, sizeof *bs);
    if (!bs) {
        return false;
    }
    for (size_t i = 0; i < n_binds; i++) {
        bs[i].name = binds[i].name;
        bs[i].value = binds[i].value;
    }
    o->binds = bs;
    o->n_binds = n_binds;
    *out_binds = bs;
    return true;
}

// Parses, binds dims, infers shapes and verifies (dlcc_load_module). Errors are in `d`.
static dl_status load_model(const char *path, const bind *binds, size_t n_binds, dl_diags *d,
                            dl_ir_module **out) {
    *out = NULL;
    dlcc_options o;
    dlcc_options_init(&o);
    dlcc_bind *bs = NULL;
    if (!options_set_binds(&o, binds, n_binds, &bs)) {
        return DL_ERR_NOMEM;
    }
    dl_status st = dlcc_load_module(path, &o, d, out);
    free(bs);
    return st;
}

static dl_status write_text_atomic(const char *path, const char *text, dl_diags *d) {
    dl_status st = dl_write_file_atomic(path, text, strlen(text));
    if (st != DL_OK) {
        file_diag(d, path, "cannot write: %s",
                  st == DL_ERR_IO ? strerror(errno) : dl_status_str(st));
    }
    return st;
}

// ---------------------------------------------------------------------------------------------
// dlcc check

static int cmd_check(int argc, char **argv) {
    cli_args a = {"check", argc, argv, 0, false};
    bool verbose = false, verify_each = false;
    DL_VEC(const char *) files = {0};
    int rc = EXIT_OK;
    while (a.i < argc) {
        const char *arg = argv[a.i];
        if (!a.no_more_flags && strcmp(arg, "--") == 0) {
            a.no_more_flags = true;
            a.i++;
        } else if (cli_is_flag(&a)) {
            if (cli_take_flag(&a, NULL, "--verify-each", false, NULL) == 1) {
                verify_each = true;
                continue;
            }
            int r = cli_take_flag(&a, "-v", "--verbose", false, NULL);
            if (r == 0) {
                rc = cli_usage_error("check", "unknown flag '%s'", arg);
                goto out;
            }
            verbose = true;
        } else {
            if (!DL_VEC_PUSH(&files, arg)) {
                rc = EXIT_INTERNAL;
                goto out;
            }
            a.i++;
        }
    }
    if (files.len == 0) {
        rc = cli_usage_error("check", "no input files");
        goto out;
    }
    dl_diags *d = NULL;
    if (dl_diags_create(&d) != DL_OK) {
        rc = EXIT_INTERNAL;
        goto out;
    }
    for (size_t i = 0; i < files.len; i++) {
        dl_ir_module *m = NULL;
        dl_status st = load_model(files.data[i], NULL, 0, d, &m);
        size_t n_fwd = m ? m->nodes.len : 0;
        // The pipeline up to the back end: a train block is checked by deriving its training
        // graph (an op on the path from a param to the loss without a gradient rule is an error
        // here, not at compile time).
        if (st == DL_OK) {
            dlcc_options o;
            dlcc_options_init(&o);
            o.verify_each = verify_each;
            st = dlcc_check_module(m, &o, d);
        }
        if (!cli_flush_diags(d)) {
            rc = EXIT_INTERNAL;
        }
        if (st != DL_OK) {
            int e = cli_status_exit(st);
            rc = rc > e ? rc : e;
        } else if (verbose) {
            if (m->has_backward) {
                printf("%s: ok (%zu nodes, %zu params; train step: %zu backward nodes)\n",
                       files.data[i], n_fwd, m->params.len, m->nodes.len - m->n_fwd_nodes);
            } else {
                printf("%s: ok (%zu nodes, %zu params)\n", files.data[i], n_fwd, m->params.len);
            }
        }
        dl_ir_module_destroy(m);
    }
    dl_diags_destroy(d);
out:
    free(files.data);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// dlcc fmt

static int cmd_fmt(int argc, char **argv) {
    cli_args a = {"fmt", argc, argv, 0, false};
    const char *out_path = NULL;
    bool check = false;
    DL_VEC(const char *) files = {0};
    dl_diags *d = NULL;
    int rc = EXIT_OK;
    while (a.i < argc) {
        const char *arg = argv[a.i];
        if (!a.no_more_flags && strcmp(arg, "--") == 0) {
            a.no_more_flags = true;
            a.i++;
            continue;
        }
        if (!cli_is_flag(&a)) {
            if (!DL_VEC_PUSH(&files, arg)) {
                rc = EXIT_INTERNAL;
                goto out;
            }
            a.i++;
            continue;
        }
        int r;
        if ((r = cli_take_flag(&a, "-o", "--output", true, &out_path)) != 0) {
            if (r < 0) {
                rc = EXIT_USAGE;
                goto out;
            }
        } else if (cli_take_flag(&a, NULL, "--check", false, NULL) == 1) {
            check = true;
        } else {
            rc = cli_usage_error("fmt", "unknown flag '%s'", arg);
            goto out;
        }
    }
    if (files.len == 0) {
        rc = cli_usage_error("fmt", "no input file");
        goto out;
    }
    if (check && out_path) {
        rc = cli_usage_error("fmt", "--check and -o cannot be combined");
        goto out;
    }
    if (!check && files.len > 1) {
        rc = cli_usage_error("fmt", "one file at a time (or use --check to check several)");
        goto out;
    }
    if (dl_diags_create(&d) != DL_OK) {
        rc = EXIT_INTERNAL;
        goto out;
    }
    for (size_t i = 0; i < files.len; i++) {
        const char *path = files.data[i];
        dl_ir_module *m = NULL;
        char *text = NULL;
        dl_status st = dl_fe_parse_file(path, d, &m);
        if (st == DL_OK) {
            st = dl_ir_print(m, &text);
            if (st != DL_OK && dl_diags_error_count(d) == 0) {
                file_diag(d, path, "cannot print model (%s)", dl_status_str(st));
            }
        } else if (dl_diags_error_count(d) == 0) {
            file_diag(d, path, "cannot load model (%s)", dl_status_str(st));
        }
        if (st == DL_OK && check) {
            char *orig = NULL;
            size_t orig_len = 0;
            st = dl_read_file(path, &orig, &orig_len);
            if (st != DL_OK) {
                file_diag(d, path, "cannot read: %s", strerror(errno));
            } else if (orig_len != strlen(text) || memcmp(orig, text, orig_len) != 0) {
                printf("%s\n", path);
                rc = rc > EXIT_INPUT ? rc : EXIT_INPUT;
            }
            free(orig);
        } else if (st == DL_OK && out_path) {
            st = write_text_atomic(out_path, text, d);
        } else if (st == DL_OK) {
            fputs(text, stdout);
        }
        free(text);
        dl_ir_module_destroy(m);
        if (!cli_flush_diags(d)) {
            st = DL_ERR_NOMEM;
        }
        if (st != DL_OK) {
            int e = cli_status_exit(st);
            rc = rc > e ? rc : e;
        }
    }
out:
    dl_diags_destroy(d);
    free(files.data);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// dlcc run

typedef struct io_arg {
    char name[128];
    const char *path;
} io_arg;

// Lists the names of `vals` as "a, b, c" into b (or "none").
// The tensor's type in .dlg syntax, e.g. "float[64, 784]".
static void tensor_type_format(const dl_tensor *t, char *buf, size_t size) {
    char shp[200];
    dl_shape_format(t->dims, t->rank, shp, sizeof shp);
    snprintf(buf, size, "%s%s", dl_dtype_name(t->dtype), shp);
}

// Prints "NAME: TYPE = [v0, v1, ... (N values)]" with at most 8 values.
static void print_preview(const char *name, const dl_tensor *t) {
    char ty[256];
    tensor_type_format(t, ty, sizeof ty);
    int64_t n = dl_tensor_numel(t);
    printf("%s: %s = ", name, ty);
    if (t->rank == 0) {
        printf("%.6g\n", dl_tensor_get(t, 0));
        return;
    }
    printf("[");
    int64_t shown = n < 8 ? n : 8;
    for (int64_t i = 0; i < shown; i++) {
        double v = dl_tensor_get(t, i);
        if (t->dtype == DL_DT_BOOL) {
            printf("%s%s", i ? ", " : "", v != 0 ? "true" : "false");
        } else {
            printf("%s%.6g", i ? ", " : "", v);
        }
    }
    if (n > shown) {
        printf(", ... (%lld values)", (long long)n);
    }
    printf("]\n");
}

static const char *const known_backends[] = {"ref", "cpu", "cuda"};

// A named interface tensor of a model, from the IR or from a loaded artifact.
typedef struct io_desc {
    const char *name;
    dl_dtype dtype;
    int32_t rank;
    int64_t dims[DL_MAX_RANK];
} io_desc;

static io_desc io_from_value(const dl_ir_value *v) {
    io_desc io = {v->name, v->type.dtype, v->type.rank, {0}};
    for (int32_t i = 0; i < v->type.rank; i++) {
        io.dims[i] = v->type.dims[i].value;
    }
    return io;
}

static io_desc io_from_rt(const dlrt_tensor_desc *t) {
    io_desc io = {t->name, (dl_dtype)t->dtype, t->rank, {0}};
    for (int32_t i = 0; i < t->rank; i++) {
        io.dims[i] = t->dims[i];
    }
    return io;
}

static void io_format(const io_desc *io, char *buf, size_t size) {
    char shp[200];
    dl_shape_format(io->dims, io->rank, shp, sizeof shp);
    snprintf(buf, size, "%s%s", dl_dtype_name(io->dtype), shp);
}

static bool io_matches(const dl_tensor *t, const io_desc *io) {
    if (t->dtype != io->dtype || t->rank != io->rank) {
        return false;
    }
    for (int32_t i = 0; i < t->rank; i++) {
        if (t->dims[i] != io->dims[i]) {
            return false;
        }
    }
    return true;
}

static void io_list_names(dl_strbuf *b, const io_desc *ios, size_t n) {
    if (n == 0) {
        dl_strbuf_puts(b, "none");
    }
    for (size_t i = 0; i < n; i++) {
        dl_strbuf_printf(b, "%s%s", i ? ", " : "", ios[i].name);
    }
}

// True when `path` starts with the ELF magic: an artifact rather than a .dlg text.
static bool is_artifact_file(const char *path) {
    // Not fopen: opening a FIFO would block; a non-regular file is no artifact (the parser then
    // reports "not a regular file").
    FILE *f = NULL;
    if (dl_fopen_regular(path, SIZE_MAX, &f, NULL, 0) != DL_OK) {
        return false;
    }
    unsigned char mag[4] = {0};
    size_t n = fread(mag, 1, 4, f);
    fclose(f);
    return n == 4 && memcmp(mag, "\177ELF", 4) == 0;
}

static void rt_diag(dl_diags *d, const char *path, dlrt_status st) {
    dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s: %s", path,
            dlrt_last_error()[0] ? dlrt_last_error() : dlrt_status_str(st));
}

// "dlcc: cache hit|miss KEY (N.N ms)" for -v ("cache off" when no cache was used), then why the
// cache was read-only or off when the driver says (DLCC_CACHE_READONLY, DLCC_CACHE=0, ...).
// A checkpoint load's notice (a PyTorch-only buffer skipped, a param the file lacks keeping its
// value) on stderr, as a note on the file.
static void print_load_notice(void *path, const char *name, const char *what) {
    fprintf(stderr, "%s: note: '%s' %s\n", (const char *)path, name, what);
}

// Loads checkpoint `path` into s with map's rename rules (--map; none when it is empty), its
// notices on stderr.
static dlrt_status session_load_mapped(dlrt_session *s, const char *path, const load_map *map) {
    dlrt_load_options o;
    dlrt_load_options_init(&o);
    o.rules = map->rules;
    o.n_rules = map->n;
    o.notice = print_load_notice;
    o.user = (void *)(uintptr_t)path;
    return dlrt_session_load_with(s, path, &o);
}

static void print_cache_line(const dlcc_result *r) {
    char hex[33];
    dl_hash128_hex(r->key, hex);
    fprintf(stderr, "dlcc: cache %s %s (%.1f ms)\n",
            !r->cache_used ? "off"
            : r->cache_hit ? "hit"
                           : "miss",
            hex, r->total_ms);
    if (strncmp(r->cache_note, "read-only", 9) == 0) {
        fprintf(stderr, "dlcc: the cache is %s: hits are used, a miss is compiled but not stored\n",
                r->cache_note);
    } else if (r->cache_note[0]) {
        fprintf(stderr, "dlcc: the cache is %s\n", r->cache_note);
    }
}

// Cache flags shared by compile and run: --no-cache, --cache-dir DIR. Returns 1 when argv[a->i]
// was one of them (consumed), 0 when not, -1 on a usage error (printed).
static int take_cache_flag(cli_args *a, dlcc_options *o) {
    if (cli_take_flag(a, NULL, "--no-cache", false, NULL) == 1) {
        o->use_cache = false;
        return 1;
    }
    return cli_take_name_flag(a, "--cache-dir", "a directory", &o->cache_dir);
}

static const char *const known_entries[] = {"infer", "train_step"};

static bool in_list(const char *s, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s, list[i]) == 0) {
            return true;
        }
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// Threads and profiling (run and train)

typedef struct exec_args {
    long threads;        // 0: the runtime's default ($DLRT_THREADS, else the cores)
    const char *profile; // --profile FILE, or NULL
    bool summary;        // --profile-summary
    bool ftz;            // --ftz: flush denormals to zero during steps
    const char *source;  // the .dlg name shown with kernel lines (NULL: the model's name)
} exec_args;

#define PROFILE_SUMMARY_TOP 10

// --threads T, --profile FILE, --profile-summary, --ftz: 1 when argv[a->i] was one of them
// (consumed), 0 when not, -1 on a usage error (printed).
static int take_exec_flag(cli_args *a, exec_args *x) {
    const char *val = NULL;
    int r;
    if ((r = cli_take_flag(a, NULL, "--threads", true, &val)) != 0) {
        if (r < 0) {
            return -1;
        }
        if (!cli_parse_long(val, 1, DLRT_MAX_THREADS, &x->threads)) {
            cli_usage_error(a->cmd, "--threads expects an integer 1..%d, got '%s'",
                            DLRT_MAX_THREADS, val);
            return -1;
        }
        return 1;
    }
    if (cli_take_flag(a, NULL, "--profile-summary", false, NULL) == 1) {
        x->summary = true;
        return 1;
    }
    if (cli_take_flag(a, NULL, "--ftz", false, NULL) == 1) {
        x->ftz = true;
        return 1;
    }
    return cli_take_name_flag(a, "--profile", "a file name", &x->profile);
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

// A session with the threads and profiling asked for.
static dlrt_status exec_session_create(dlrt_model *rtm, const exec_args *x, dlrt_session **out) {
    dlrt_session_options o;
    dlrt_session_options_init(&o);
    o.threads = (int)x->threads;
    o.source_name = x->source;
    o.flush_denormals = x->ftz;
    dlrt_status rs = dlrt_session_create_ex(rtm, &o, out);
    if (rs == DLRT_OK && (x->profile || x->summary)) {
        rs = dlrt_session_profile_begin(*out);
    }
    return rs;
}

// After a successful run: the trace file and the summary. Returns an exit code.
static int exec_session_finish(dl_diags *d, dlrt_session *s, const exec_args *x) {
    dlrt_status rs;
    if (x->profile && (rs = dlrt_session_profile_write(s, x->profile)) != DLRT_OK) {
        rt_diag(d, x->profile, rs);
        return EXIT_INPUT;
    }
    if (x->summary) {
        fflush(stdout);
        (void)dlrt_session_profile_summary(s, stderr, PROFILE_SUMMARY_TOP);
    }
    return EXIT_OK;
}

static double clock_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// ---------------------------------------------------------------------------------------------
// Non-finite train steps (dlcc train and dlcc run --entry train_step)
//
// A step is non-finite when the runtime skipped its update (a non-finite gradient) or its loss
// is not finite. The first one is reported as a warning naming the step. The run stops with
// EXIT_DIVERGED and writes no checkpoint (the params are those of the last finite update, but a
// run that diverged has nothing worth keeping) once N = --max-skipped-steps non-finite steps
// form a streak: N in a row, or N with fewer than N finite steps between any two of them (a run
// whose params have blown up alternates non-finite steps with finite but huge ones; only N
// finite steps in a row count as a recovery and end the streak). With dynamic loss scaling a
// skipped step with a finite loss whose loss scale was above 1 and went down is the scaler's
// normal backoff (the scaled gradients overflowed), so it is not counted.

#define DEFAULT_MAX_SKIPPED 10

// The guard itself is the runtime's (dlrt_nonfinite_guard, runtime/rt_trainloop.c).

// A double with `prec` significant digits, "nan" for every NaN (glibc prints "-nan" for some)
// and "inf" / "-inf": readable whatever the magnitude (1.65e+30, not 31 digits).
static const char *num_prec(double v, int prec, char *buf, size_t size) {
    if (isnan(v)) {
        snprintf(buf, size, "nan");
    } else {
        snprintf(buf, size, "%.*g", prec, v);
    }
    return buf;
}

static const char *num_text(double v, char *buf, size_t size) {
    return num_prec(v, 4, buf, size);
}

// "dlcc CMD: warning: STEP is non-finite: ..." for the first non-finite step.
static void guard_warn(const char *cmd, const char *step_desc, const dlrt_step_info *info,
                       const dlrt_nonfinite_guard *g) {
    char l[32], n[32];
    fflush(stdout);
    char stop[160];
    if (g->max > 0) {
        snprintf(stop, sizeof stop,
                 "training stops after %lld of them unless %lld finite steps in a row come "
                 "between (--max-skipped-steps)",
                 (long long)g->max, (long long)g->max);
    } else {
        snprintf(stop, sizeof stop, "training goes on regardless (--max-skipped-steps 0)");
    }
    fprintf(stderr, "dlcc %s: warning: %s is non-finite (loss %s, grad_norm %s): %s; %s\n", cmd,
            step_desc, num_text(info->loss, l, sizeof l), num_text(info->grad_norm, n, sizeof n),
            info->skipped ? "its update was skipped (params and optimizer state unchanged)"
                          : "its update was applied",
            stop);
}

// The error of a run that stopped at step `step` (`step_desc`), its streak of `g->run`
// non-finite steps complete. `ckpt`: the checkpoint that is not written (NULL: none asked for);
// `hint`: suggest --detect-anomaly.
static void guard_stop_msg(const char *cmd, const char *step_desc, int64_t step,
                           const dlrt_nonfinite_guard *g, const char *ckpt, bool hint) {
    char what[160];
    int64_t span = step - g->run_start + 1;
    if (span == g->run) {
        snprintf(what, sizeof what, "%lld consecutive non-finite steps from step %lld on",
                 (long long)g->run, (long long)g->run_start);
    } else {
        snprintf(what, sizeof what,
                 "%lld non-finite steps among the %lld from step %lld on, never %lld finite "
                 "ones in a row between them",
                 (long long)g->run, (long long)span, (long long)g->run_start, (long long)g->max);
    }
    fflush(stdout);
    fprintf(stderr,
            "dlcc %s: error: training diverged at %s: %s (--max-skipped-steps %lld; 0 never "
            "stops)%s%s%s\n",
            cmd, step_desc, what, (long long)g->max, ckpt ? "; no checkpoint written to " : "",
            ckpt ? ckpt : "",
            hint ? "; --detect-anomaly shows where the first non-finite value appears" : "");
}

// ---- --detect-anomaly: where the first non-finite value of a step appears
//
// The runtime never sees the IR, so this happens here: the failing step is replayed in the
// reference evaluator (ir/eval.c, the oracle `dlcc run --backend ref` uses) on the same batch,
// with the params from before the step (snapshot taken before every step), the loss scale it
// ran with and its Dropout RNG counter; then every value the train step computes is checked in
// execution order (the inputs, the params, then the nodes of the forward and backward graph in
// order, nodes the train step does not need left out). A float value counts as non-finite when
// it is NaN or Inf or beyond float32's range (the compiled code computes in float32, the
// evaluator in double). Limits: an overflow inside one float32 kernel that the evaluator's
// double does not reproduce is reported as such (the replay stays finite); with gradient
// accumulation only the boundary call's own micro-batch is replayed; the Dropout counter is the
// number of train_step calls of this session, so after --init from a checkpoint that stored
// another counter the masks differ.

typedef struct anomaly_ctx {
    dl_ir_module *m;   // BORROWED: the .dlg module, with the training graph added
    dl_tensor *params; // OWNED: m->params order, the values before the current step
    bool *needed;      // OWNED: per value id, computed by the train step
    int64_t calls;     // train_step calls on the session so far (the Dropout RNG counter)
} anomaly_ctx;

static void anomaly_fini(anomaly_ctx *a) {
    if (a->params) {
        for (size_t i = 0; i < a->m->params.len; i++) {
            dl_tensor_free(&a->params[i]);
        }
    }
    free(a->params);
    free(a->needed);
    memset(a, 0, sizeof *a);
}

static void mark_needed(bool *needed, const dl_ir_value *v) {
    if (v) {
        needed[v->id] = true;
    }
}

// Adds the training graph to `m` (the compiler's pipeline from autodiff through mixed
// precision) and allocates the param snapshot. Errors into `d`.
static dl_status anomaly_init(anomaly_ctx *a, dl_ir_module *m, dl_diags *d) {
    memset(a, 0, sizeof *a);
    a->m = m;
    DL_TRY(dl_pass_pipeline_run(m, DL_PASS_AUTODIFF, DL_PASS_PRECISION, NULL, d));
    a->params = dl_mem_calloc(m->params.len ? m->params.len : 1, sizeof *a->params);
    a->needed = dl_mem_calloc(m->values.len ? m->values.len : 1, sizeof *a->needed);
    if (!a->params || !a->needed) {
        return DL_ERR_NOMEM;
    }
    for (size_t i = 0; i < m->params.len; i++) {
        const dl_ir_value *p = m->params.data[i];
        int64_t dims[DL_MAX_RANK];
        for (int32_t k = 0; k < p->type.rank; k++) {
            dims[k] = p->type.dims[k].value;
        }
        DL_TRY(dl_tensor_alloc(&a->params[i], p->type.dtype, p->type.rank, dims));
    }
    // What the train step computes: its roots and, backwards, everything they depend on.
    mark_needed(a->needed, m->train_loss);
    for (size_t i = 0; i < m->grads.len; i++) {
        mark_needed(a->needed, m->grads.data[i]);
    }
    for (size_t i = 0; i < m->assigns.len; i++) {
        mark_needed(a->needed, m->assigns.data[i].value);
    }
    for (size_t i = m->nodes.len; i-- > 0;) {
        const dl_ir_node *n = m->nodes.data[i];
        bool any = false;
        for (size_t k = 0; k < n->n_outputs; k++) {
            any = any || a->needed[n->outputs[k]->id];
        }
        for (size_t k = 0; any && k < n->n_inputs; k++) {
            mark_needed(a->needed, n->inputs[k]);
        }
    }
    return DL_OK;
}

// Copies the session's params into the snapshot (before a step).
static dlrt_status anomaly_snapshot(anomaly_ctx *a, dlrt_session *s) {
    for (size_t i = 0; i < a->m->params.len; i++) {
        dl_tensor *t = &a->params[i];
        dlrt_status rs =
            dlrt_session_get_param(s, a->m->params.data[i]->name, t->data, dl_tensor_nbytes(t));
        if (rs != DLRT_OK) {
            return rs;
        }
    }
    return DLRT_OK;
}

static bool is_float_dtype(dl_dtype t) {
    return t == DL_DT_FLOAT || t == DL_DT_FLOAT16 || t == DL_DT_BFLOAT16;
}

static bool bad_value(dl_dtype t, double v) {
    return !isfinite(v) || (t == DL_DT_FLOAT && fabs(v) > FLT_MAX);
}

// The first non-finite element of `n` doubles of dtype t: its index, or -1; *count all of them.
static int64_t first_bad(dl_dtype t, const double *x, int64_t n, int64_t *count) {
    int64_t first = -1, c = 0;
    for (int64_t i = 0; i < n; i++) {
        if (bad_value(t, x[i])) {
            first = first < 0 ? i : first;
            c++;
        }
    }
    *count = c;
    return first;
}

static int64_t type_numel(const dl_ir_type *t) {
    int64_t n = 1;
    for (int32_t k = 0; k < t->rank; k++) {
        n *= t->dims[k].value;
    }
    return n;
}

// "nan", "inf", "-inf" or "3.5e+39 (beyond float32)".
static const char *bad_text(double v, char *buf, size_t size) {
    if (isnan(v)) {
        snprintf(buf, size, "nan");
    } else if (isinf(v)) {
        snprintf(buf, size, "%sinf", v < 0 ? "-" : "");
    } else {
        snprintf(buf, size, "%.4g (beyond float32)", v);
    }
    return buf;
}

// The first non-finite element of a tensor (-1 if none), its value and the count of them.
static int64_t tensor_first_bad(const dl_tensor *t, int64_t *count, double *first_val) {
    int64_t n = dl_tensor_numel(t), first = -1, c = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = dl_tensor_get(t, i);
        if (!isfinite(v)) {
            if (first < 0) {
                first = i;
                *first_val = v;
            }
            c++;
        }
    }
    *count = c;
    return first;
}

// Reports (into `d`) where the first non-finite value of step `step_desc` appears. `inputs`
// follow m->inputs order (the step's batch), the snapshot holds the params from before the step
// and `loss_scale` is the scale the step ran with.
static void anomaly_report(anomaly_ctx *a, const dl_tensor *inputs, double loss_scale,
                           const char *step_desc, dl_diags *d) {
    dl_ir_module *m = a->m;
    char vb[64];
    // 1. The batch and the params, as the step received them.
    for (int pass = 0; pass < 2; pass++) {
        size_t n = pass == 0 ? m->inputs.len : m->params.len;
        for (size_t i = 0; i < n; i++) {
            const dl_ir_value *v = pass == 0 ? m->inputs.data[i] : m->params.data[i];
            const dl_tensor *t = pass == 0 ? &inputs[i] : &a->params[i];
            int64_t count = 0, first = -1;
            double fv = 0;
            if (!is_float_dtype(t->dtype) || (first = tensor_first_bad(t, &count, &fv)) < 0) {
                continue;
            }
            dl_diag(d, DL_SEV_WARNING, v->loc,
                    "--detect-anomaly: %s: %s '%s' already holds non-finite values before the "
                    "step (%lld of %lld elements; the first, element %lld, is %s)%s",
                    step_desc, pass == 0 ? "input" : "param", v->name, (long long)count,
                    (long long)dl_tensor_numel(t), (long long)first, bad_text(fv, vb, sizeof vb),
                    pass == 0 ? "" : ": an earlier update made it non-finite");
            return;
        }
    }
    // 2. The replay: the loss scale seeds the backward pass, the RNG counter the Dropouts.
    dl_ir_literal *seed = m->grad_seed && m->grad_seed->lit ? m->grad_seed->lit : NULL;
    double seed_was = seed && seed->f ? seed->f[0] : 1.0;
    if (seed && seed->f) {
        seed->f[0] = (double)(float)loss_scale;
    }
    if (m->step_counter && m->step_counter->lit && m->step_counter->lit->i) {
        m->step_counter->lit->i[0] = a->calls;
    }
    dl_ir_eval_opts opts = {a->params, m->params.len, true};
    double **vals = NULL;
    dl_status st = dl_ir_eval_all_f64(m, &opts, inputs, &vals, d);
    if (seed && seed->f) {
        seed->f[0] = seed_was;
    }
    if (st != DL_OK) {
        dl_diag(d, DL_SEV_WARNING, DL_NO_LOC,
                "--detect-anomaly: %s: the reference evaluator could not replay the step (%s)",
                step_desc, dl_status_str(st));
        return;
    }
    bool found = false;
    for (size_t i = 0; i < m->nodes.len && !found; i++) {
        const dl_ir_node *n = m->nodes.data[i];
        for (size_t k = 0; k < n->n_outputs && !found; k++) {
            const dl_ir_value *o = n->outputs[k];
            if (!a->needed[o->id] || !is_float_dtype(o->type.dtype) || !vals[o->id]) {
                continue;
            }
            int64_t numel = type_numel(&o->type), count = 0;
            int64_t first = first_bad(o->type.dtype, vals[o->id], numel, &count);
            if (first < 0) {
                continue;
            }
            found = true;
            dl_diag(d, DL_SEV_WARNING, n->loc,
                    "--detect-anomaly: %s: the first non-finite value appears in output '%s' "
                    "of %s (%s graph, node %zu of %zu): %lld of %lld elements non-finite, the "
                    "first (element %lld) %s",
                    step_desc, o->name, dl_ir_op_get_info(n->op)->name,
                    i < m->n_fwd_nodes ? "forward" : "backward", i + 1, m->nodes.len,
                    (long long)count, (long long)numel, (long long)first,
                    bad_text(vals[o->id][first], vb, sizeof vb));
            // Its inputs are all finite (else an earlier value would have been reported):
            // their ranges usually say why (Log of a negative, a division by zero, ...).
            dl_strbuf b = {0};
            for (size_t j = 0; j < n->n_inputs; j++) {
                const dl_ir_value *in = n->inputs[j];
                if (!in || !vals[in->id]) {
                    continue;
                }
                int64_t ne = type_numel(&in->type);
                double lo = INFINITY, hi = -INFINITY;
                for (int64_t e = 0; e < ne; e++) {
                    lo = fmin(lo, vals[in->id][e]);
                    hi = fmax(hi, vals[in->id][e]);
                }
                char l[32], h[32];
                dl_strbuf_printf(&b, "%s'%s' in [%s, %s]", b.data ? ", " : "", in->name,
                                 num_text(lo, l, sizeof l), num_text(hi, h, sizeof h));
            }
            if (b.data) {
                dl_diag(d, DL_SEV_NOTE, n->loc, "the inputs of that %s are finite: %s",
                        dl_ir_op_get_info(n->op)->name, b.data);
            }
            dl_strbuf_fini(&b);
        }
    }
    if (!found) {
        double loss = m->train_loss && vals[m->train_loss->id] ? vals[m->train_loss->id][0] : 0;
        char l[32];
        dl_diag(d, DL_SEV_WARNING, DL_NO_LOC,
                "--detect-anomaly: %s: the reference evaluator's replay of the step stays "
                "finite (loss %s), so the non-finite value comes from the compiled code's "
                "float32 arithmetic where the evaluator's double precision does not overflow",
                step_desc, num_text(loss, l, sizeof l));
    }
    for (size_t i = 0; i < m->values.len; i++) {
        free(vals[i]);
    }
    free(vals);
}

// ---------------------------------------------------------------------------------------------
// Helpers of `dlcc run --entry train_step`

// `t` is [K', ...io's shape] of io's dtype with K' >= steps.
static bool io_matches_stepped(const dl_tensor *t, const io_desc *io, long steps) {
    if (t->dtype != io->dtype || t->rank != io->rank + 1 || t->dims[0] < steps) {
        return false;
    }
    for (int32_t i = 0; i < io->rank; i++) {
        if (t->dims[i + 1] != io->dims[i]) {
            return false;
        }
    }
    return true;
}

// What `dlcc run --entry train_step` does besides the inputs.
typedef struct run_train_args {
    long steps;
    const char *init_params, *save_params;
    const load_map *map; // --map: the rename rules of --params' load
    long max_skipped;    // --max-skipped-steps
    bool detect_anomaly; // --detect-anomaly (a .dlg model: `m` is non-NULL)
} run_train_args;

// `dlcc run --entry train_step`: optional checkpoint load, `steps` train steps (input j from
// in_t[j], or its slice i when stepped[j]), one line per step, optional checkpoint save. Stops
// with EXIT_DIVERGED after max_skipped consecutive non-finite steps (nothing saved).
static int run_train_steps(dl_diags *d, const char *file, dlrt_model *rtm, dl_ir_module *m,
                           const io_desc *in_io, const dl_tensor *in_t, const bool *stepped,
                           size_t n_in, const run_train_args *ra, const exec_args *xa,
                           bool verbose) {
    if (!dlrt_model_has_train_step(rtm)) {
        file_diag(d, file, "the artifact has no train_step entry point");
        return EXIT_INPUT;
    }
    dlrt_session *s = NULL;
    anomaly_ctx an;
    memset(&an, 0, sizeof an);
    dl_tensor *step_in = NULL; // m->inputs order: this step's slices of in_t (BORROWED data)
    dlrt_status rs = exec_session_create(rtm, xa, &s);
    if (rs != DLRT_OK) {
        rt_diag(d, file, rs);
        dlrt_session_destroy(s);
        return rs == DLRT_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
    }
    double step_s = 0; // time inside dlrt_session_train_step
    int rc = EXIT_OK;
    if (ra->init_params && (rs = session_load_mapped(s, ra->init_params, ra->map)) != DLRT_OK) {
        rt_diag(d, ra->init_params, rs);
        rc = rs == DLRT_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
        goto out;
    }
    if (ra->detect_anomaly) {
        dl_status st = anomaly_init(&an, m, d);
        step_in = dl_mem_calloc(n_in ? n_in : 1, sizeof *step_in);
        if (st != DL_OK || !step_in) {
            rc = st == DL_OK || st == DL_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
            goto out;
        }
    }
    double scale0 = 1;
    if (dlrt_session_get_hparam(s, "loss_scale", &scale0) != DLRT_OK) {
        scale0 = 1;
    }
    dlrt_nonfinite_guard g;
    dlrt_nonfinite_guard_init(&g, ra->max_skipped, scale0);
    for (long i = 0; i < ra->steps; i++) {
        for (size_t j = 0; j < n_in; j++) {
            size_t nb = dl_tensor_nbytes(&in_t[j]);
            const uint8_t *data = in_t[j].data;
            if (stepped[j]) {
                nb /= (size_t)in_t[j].dims[0];
                data += nb * (size_t)i;
            }
            if (step_in) { // in_io follows m->inputs for a .dlg
                step_in[j].dtype = in_io[j].dtype;
                step_in[j].rank = in_io[j].rank;
                memcpy(step_in[j].dims, in_io[j].dims, sizeof step_in[j].dims);
                step_in[j].data = (void *)(uintptr_t)data; // only read
            }
            if ((rs = dlrt_session_set_input(s, in_io[j].name, data, nb)) != DLRT_OK) {
                break;
            }
        }
        if (rs == DLRT_OK && ra->detect_anomaly) {
            rs = anomaly_snapshot(&an, s);
        }
        dlrt_step_info info;
        memset(&info, 0, sizeof info);
        double scale_used = g.scale;
        if (rs == DLRT_OK) {
            double t0 = clock_s();
            rs = dlrt_session_train_step(s, &info);
            step_s += clock_s() - t0;
            an.calls++;
        }
        if (rs != DLRT_OK) {
            rt_diag(d, file, rs);
            rc = rs == DLRT_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
            goto out;
        }
        char l[32], gn[32];
        printf("step %ld loss %s grad_norm %s skipped %d\n", i + 1,
               num_prec(info.loss, 9, l, sizeof l), num_prec(info.grad_norm, 9, gn, sizeof gn),
               info.skipped);
        if (dlrt_nonfinite_guard_step(&g, &info, i + 1)) {
            char desc[64];
            snprintf(desc, sizeof desc, "step %ld", i + 1);
            if (g.first) {
                guard_warn("run", desc, &info, &g);
                if (ra->detect_anomaly) {
                    an.calls--; // the replayed call's counter
                    anomaly_report(&an, step_in, scale_used, desc, d);
                    an.calls++;
                    if (!cli_flush_diags(d)) {
                        rc = EXIT_INTERNAL;
                        goto out;
                    }
                }
            }
            if (g.stop) {
                guard_stop_msg("run", desc, i + 1, &g, ra->save_params, !ra->detect_anomaly);
                rc = EXIT_DIVERGED;
                goto out;
            }
        }
    }
    if (g.total > 0) {
        fflush(stdout);
        fprintf(stderr, "dlcc run: warning: %lld of %ld steps were non-finite\n",
                (long long)g.total, ra->steps);
    }
    if (ra->save_params && (rs = dlrt_session_save(s, ra->save_params)) != DLRT_OK) {
        rt_diag(d, ra->save_params, rs);
        rc = rs == DLRT_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
        goto out;
    }
    if (verbose) {
        fflush(stdout);
        fprintf(stderr, "dlcc: %ld step%s, mean %.3f ms per step (%d thread%s)\n", ra->steps,
                ra->steps == 1 ? "" : "s", step_s * 1e3 / (double)ra->steps,
                dlrt_session_threads(s), dlrt_session_threads(s) == 1 ? "" : "s");
    }
    rc = exec_session_finish(d, s, xa);
out:
    anomaly_fini(&an);
    free(step_in);
    dlrt_session_destroy(s);
    return rc;
}

// What `dlcc run` was asked: every argument, checked before any file is touched.
typedef struct run_opts {
    const char *file, *backend, *entry;
    DL_VEC(bind) binds;
    DL_VEC(io_arg) ins, outs;
    bool verbose, detect_anomaly;
    dlcc_options copts;
    const char *steps_arg, *init_params, *save_params, *max_skipped;
    const char *normalize; // --normalize: only "none" (the checkpoint's is not reapplied)
    const char *map;       // --map FILE: the rename rules of the --params checkpoint
    long steps, max_skipped_n;
    exec_args xa;
    bool use_ref; // --backend ref: the reference evaluator
    bool is_art;  // the file is a compiled artifact (else a .dlg)
    bool train;   // --entry train_step
} run_opts;

// What a run holds; everything OWNED, freed by run_state_fini.
typedef struct run_state {
    dl_diags *d;
    dl_ir_module *m; // the .dlg module (NULL for an artifact)
    dlrt_model *rtm; // the compiled model (NULL for --backend ref)
    dlrt_session *sess;
    uint8_t *art;            // the compiled bytes rtm was loaded from
    io_desc *in_io, *out_io; // the model's interface
    size_t n_in, n_out;
    dl_tensor *in_t, *out_t; // the inputs read, the outputs made (n_out_t of them)
    dl_tensor *params;       // --params for --backend ref (n_params, m->params order)
    size_t n_params;
    size_t n_out_t;
    bool *stepped; // per input: its .npy has a leading step dim (train_step)
    dlcc_bind *cbinds;
    const char *model_name; // BORROWED from m or rtm
    bool is_pruned;         // m keeps only the outputs asked for (inputs were left out): compile m
    load_map map;           // --map's rules (none without it)
} run_state;

static void run_opts_fini(run_opts *o) {
    free(o->binds.data);
    free(o->ins.data);
    free(o->outs.data);
}

static void run_state_fini(run_state *rn) {
    if (rn->in_t) {
        for (size_t j = 0; j < rn->n_in; j++) {
            dl_tensor_free(&rn->in_t[j]);
        }
    }
    dlrt_session_destroy(rn->sess);
    dlrt_model_release(rn->rtm);
    free(rn->art);
    free(rn->in_io);
    free(rn->out_io);
    for (size_t j = 0; j < rn->n_out_t; j++) {
        dl_tensor_free(&rn->out_t[j]);
    }
    free(rn->in_t);
    for (size_t j = 0; j < rn->n_params; j++) {
        dl_tensor_free(&rn->params[j]);
    }
    free(rn->params);
    free(rn->stepped);
    free(rn->out_t);
    free(rn->cbinds);
    load_map_fini(&rn->map);
    dl_ir_module_destroy(rn->m);
    dl_diags_destroy(rn->d);
}

// 1. Arguments (no file is touched before they are all valid).
static int run_parse_args(int argc, char **argv, run_opts *o) {
    int rc = EXIT_OK;
    cli_args a = {"run", argc, argv, 0, false};
    while (a.i < argc) {
        const char *arg = argv[a.i];
        const char *val = NULL;
        int r;
        if (!a.no_more_flags && strcmp(arg, "--") == 0) {
            a.no_more_flags = true;
            a.i++;
            continue;
        }
        if (!cli_is_flag(&a)) {
            if (o->file) {
                return cli_usage_error("run", "one model file at a time ('%s' and '%s')", o->file,
                                       arg);
            }
            o->file = arg;
            a.i++;
            continue;
        }
        if ((r = cli_take_flag(&a, "-D", NULL, true, &val)) != 0) {
            if (r < 0) {
                return EXIT_USAGE;
            }
            bind b;
            if ((rc = parse_define("run", val, &b)) != EXIT_OK) {
                return rc;
            }
            if (!DL_VEC_PUSH(&o->binds, b)) {
                return EXIT_INTERNAL;
            }
        } else if ((r = cli_take_flag(&a, NULL, "--in", true, &val)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--out", true, &val)) != 0) {
            if (r < 0) {
                return EXIT_USAGE;
            }
            bool is_in = strncmp(arg, "--in", 4) == 0 && (arg[4] == 0 || arg[4] == '=');
            const char *flag = is_in ? "--in" : "--out";
            io_arg io = {{0}, NULL};
            if (!split_assign(val, io.name, sizeof io.name, &io.path) || !*io.path) {
                return cli_usage_error("run", "%s expects NAME=PATH.npy, got '%s'", flag, val);
            }
            if (is_in) {
                for (size_t k = 0; k < o->ins.len; k++) {
                    if (strcmp(o->ins.data[k].name, io.name) == 0) {
                        return cli_usage_error("run", "input '%s' is given twice (%s and %s)",
                                               io.name, o->ins.data[k].path, io.path);
                    }
                }
            }
            if (!(is_in ? DL_VEC_PUSH(&o->ins, io) : DL_VEC_PUSH(&o->outs, io))) {
                return EXIT_INTERNAL;
            }
        } else if ((r = cli_take_flag(&a, NULL, "--backend", true, &o->backend)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--entry", true, &o->entry)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--steps", true, &o->steps_arg)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--max-skipped-steps", true, &o->max_skipped)) !=
                       0 ||
                   (r = cli_take_flag(&a, NULL, "--normalize", true, &o->normalize)) != 0 ||
                   (r = cli_take_name_flag(&a, "--init-params", "a file name", &o->init_params)) !=
                       0 ||
                   (r = cli_take_name_flag(&a, "--params", "a file name", &o->init_params)) != 0 ||
                   (r = cli_take_name_flag(&a, "--map", "a file name", &o->map)) != 0 ||
                   (r = cli_take_name_flag(&a, "--save-params", "a file name", &o->save_params)) !=
                       0) {
            if (r < 0) {
                return EXIT_USAGE;
            }
        } else if ((r = take_cache_flag(&a, &o->copts)) != 0 ||
                   (r = take_exec_flag(&a, &o->xa)) != 0) {
            if (r < 0) {
                return EXIT_USAGE;
            }
        } else if (cli_take_flag(&a, "-v", "--verbose", false, NULL) == 1) {
            o->verbose = true;
        } else if (cli_take_flag(&a, NULL, "--detect-anomaly", false, NULL) == 1) {
            o->detect_anomaly = true;
        } else {
            return cli_usage_error("run", "unknown flag '%s'", arg);
        }
    }
    return EXIT_OK;
}

// The arguments' combinations: backend, entry point, and what applies to which.
static int run_check_args(run_opts *o) {
    int rc = EXIT_OK;
    if (!o->file) {
        return cli_usage_error("run", "no model file");
    }
    o->use_ref = strcmp(o->backend, "ref") == 0;
    if (!o->use_ref && strcmp(o->backend, "cpu") != 0) {
        if (in_list(o->backend, known_backends, DL_ARRAY_LEN(known_backends))) {
            rc = cli_usage_error("run",
                                 "backend '%s' is not available yet in this build "
                                 "(available: cpu, ref)",
                                 o->backend);
        } else {
            rc = cli_usage_error("run", "unknown backend '%s' (available: cpu, ref)", o->backend);
        }
        return rc;
    }
    o->is_art = is_artifact_file(o->file);
    if (o->use_ref && (o->xa.threads || o->xa.profile || o->xa.summary || o->xa.ftz)) {
        return cli_usage_error("run",
                               "%s applies to compiled code; --backend ref is the reference "
                               "evaluator",
                               o->xa.threads   ? "--threads"
                               : o->xa.profile ? "--profile"
                               : o->xa.ftz     ? "--ftz"
                                               : "--profile-summary");
    }
    o->xa.source = o->is_art ? NULL : base_name(o->file);
    if (o->is_art && o->use_ref) {
        return cli_usage_error(
            "run", "--backend ref evaluates .dlg models; '%s' is a compiled artifact", o->file);
    }
    if (o->is_art && o->binds.len > 0) {
        return cli_usage_error("run",
                               "-D %s: dims of a compiled artifact are fixed; recompile with -D",
                               o->binds.data[0].name);
    }
    if (!in_list(o->entry, known_entries, DL_ARRAY_LEN(known_entries))) {
        return cli_usage_error("run", "unknown entry point '%s' (available: infer, train_step)",
                               o->entry);
    }
    o->train = strcmp(o->entry, "train_step") == 0;
    if (o->normalize && strcmp(o->normalize, "none") != 0) {
        return cli_usage_error("run",
                               "--normalize expects 'none' (the normalisation stored in the "
                               "--params checkpoint is reapplied otherwise), got '%s'",
                               o->normalize);
    }
    if (o->normalize && !o->init_params) {
        return cli_usage_error("run", "--normalize none only applies with --params");
    }
    if (o->map && !o->init_params) {
        return cli_usage_error("run", "--map renames the tensors of the --params checkpoint; "
                                      "give --params CKPT");
    }
    if (!o->train && (o->steps_arg || o->save_params || o->max_skipped || o->detect_anomaly)) {
        return cli_usage_error("run", "%s only applies to --entry train_step",
                               o->steps_arg     ? "--steps"
                               : o->save_params ? "--save-params"
                               : o->max_skipped ? "--max-skipped-steps"
                                                : "--detect-anomaly");
    }
    if (o->train) {
        if (o->use_ref) {
            return cli_usage_error("run", "--entry train_step runs compiled code; --backend ref "
                                          "evaluates the infer entry point only");
        }
        if (o->outs.len > 0) {
            return cli_usage_error("run",
                                   "--out %s: --entry train_step writes no outputs (use "
                                   "--save-params for the trained params)",
                                   o->outs.data[0].name);
        }
        if (o->steps_arg && !cli_parse_long(o->steps_arg, 1, 1000000000L, &o->steps)) {
            return cli_usage_error("run", "--steps expects an integer 1..1000000000, got '%s'",
                                   o->steps_arg);
        }
        if (o->max_skipped && !cli_parse_long(o->max_skipped, 0, LONG_MAX, &o->max_skipped_n)) {
            return cli_usage_error("run", "--max-skipped-steps expects an integer >= 0, got '%s'",
                                   o->max_skipped);
        }
        if (o->detect_anomaly && o->is_art) {
            rc =
                cli_usage_error("run",
                                "--detect-anomaly replays a step in the reference evaluator, which "
                                "needs the .dlg model; '%s' is a compiled artifact",
                                o->file);
            return rc;
        }
    }
    return EXIT_OK;
}

static int run_load_model(const run_opts *o, run_state *rn) {
    // 2. The model: a .dlg (parsed, -D applied, shapes inferred; compiled unless --backend ref)
    // or an artifact. Its interface is gathered into in_io / out_io either way.
    dl_status st = DL_OK;
    if (!o->is_art) {
        st = load_model(o->file, o->binds.data, o->binds.len, rn->d, &rn->m);
        if (st != DL_OK) {
            return cli_status_exit(st);
        }
        rn->n_in = rn->m->inputs.len;
        rn->n_out = rn->m->outputs.len;
        rn->in_io = dl_mem_calloc(rn->n_in ? rn->n_in : 1, sizeof *rn->in_io);
        rn->out_io = dl_mem_calloc(rn->n_out ? rn->n_out : 1, sizeof *rn->out_io);
        if (!rn->in_io || !rn->out_io) {
            return EXIT_INTERNAL;
        }
        for (size_t j = 0; j < rn->n_in; j++) {
            rn->in_io[j] = io_from_value(rn->m->inputs.data[j]);
        }
        for (size_t j = 0; j < rn->n_out; j++) {
            rn->out_io[j] = io_from_value(rn->m->outputs.data[j]);
        }
    } else {
        dlrt_status rs = dlrt_model_load_file(o->file, &rn->rtm);
        if (rs != DLRT_OK) {
            rt_diag(rn->d, o->file, rs);
            return EXIT_INPUT;
        }
        rn->n_in = dlrt_model_num_inputs(rn->rtm);
        rn->n_out = dlrt_model_num_outputs(rn->rtm);
        rn->in_io = dl_mem_calloc(rn->n_in ? rn->n_in : 1, sizeof *rn->in_io);
        rn->out_io = dl_mem_calloc(rn->n_out ? rn->n_out : 1, sizeof *rn->out_io);
        if (!rn->in_io || !rn->out_io) {
            return EXIT_INTERNAL;
        }
        for (size_t j = 0; j < rn->n_in; j++) {
            dlrt_tensor_desc td;
            (void)dlrt_model_input(rn->rtm, j, &td);
            rn->in_io[j] = io_from_rt(&td);
        }
        for (size_t j = 0; j < rn->n_out; j++) {
            dlrt_tensor_desc td;
            (void)dlrt_model_output(rn->rtm, j, &td);
            rn->out_io[j] = io_from_rt(&td);
        }
    }
    rn->model_name = rn->m ? rn->m->name : dlrt_model_name(rn->rtm);
    if (o->train && (rn->m ? rn->m->train == NULL : !dlrt_model_has_train_step(rn->rtm))) {
        file_diag(rn->d, o->file,
                  "model '%s' has no train block: --entry train_step needs a model with "
                  "`train LOSS { ... }`%s",
                  rn->model_name, rn->m ? "" : " (compiled from such a .dlg)");
        return EXIT_INPUT;
    }
    return EXIT_OK;
}

// Some inputs of a .dlg were not given (infer): keeps the outputs asked for (--out; without it,
// those whose inputs were all given, with a note for each other one) if none of them needs a
// missing input, else an error naming the input (and, with --out, the output that needs it).
// The module then computes only those outputs (dl_ir_module_keep_outputs) and rn->out_io
// follows it. Runs after the other argument checks, which may have found errors already.
static int run_keep_outputs(const run_opts *o, run_state *rn, const int *given) {
    dl_ir_module *m = rn->m;
    size_t nv = m->values.len ? m->values.len : 1, no = m->outputs.len ? m->outputs.len : 1;
    uint8_t *live = dl_mem_alloc(nv), *needed = dl_mem_calloc(nv, 1);
    dl_ir_value **keep = dl_mem_alloc(no * sizeof *keep);
    const dl_ir_value **missing = dl_mem_calloc(no, sizeof *missing); // per output
    int rc = EXIT_OK;
    if (!live || !needed || !keep || !missing) {
        rc = EXIT_INTERNAL;
        goto out;
    }
    size_t n_keep = 0;
    for (size_t k = 0; k < m->outputs.len; k++) {
        dl_ir_value *v = m->outputs.data[k];
        bool asked = o->outs.len == 0;
        for (size_t i = 0; i < o->outs.len && !asked; i++) {
            asked = strcmp(o->outs.data[i].name, v->name) == 0;
        }
        if (!asked) {
            continue;
        }
        memset(live, 0, nv);
        dl_ir_module_mark_deps(m, (const dl_ir_value *const *)&v, 1, live);
        for (size_t j = 0; j < m->inputs.len; j++) {
            const dl_ir_value *in = m->inputs.data[j];
            if (!given[j] && live[in->id]) {
                missing[k] = missing[k] ? missing[k] : in;
                needed[in->id] = 1;
            }
        }
        if (!missing[k]) {
            keep[n_keep++] = v;
        }
    }
    for (size_t k = 0; k < m->outputs.len; k++) {
        if (!missing[k] || (o->outs.len == 0 && n_keep == 0)) {
            continue;
        }
        const dl_ir_value *in = missing[k];
        char ty[256];
        io_desc io = io_from_value(in);
        io_format(&io, ty, sizeof ty);
        if (o->outs.len) {
            dl_diag(rn->d, DL_SEV_ERROR, DL_NO_LOC,
                    "missing input '%s': output '%s' needs it (expected %s; give it with --in "
                    "%s=PATH.npy)",
                    in->name, m->outputs.data[k]->name, ty, in->name);
        } else {
            dl_diag(rn->d, DL_SEV_NOTE, DL_NO_LOC,
                    "output '%s' is not computed: it needs input '%s', which was not given",
                    m->outputs.data[k]->name, in->name);
        }
    }
    if (o->outs.len == 0 && n_keep == 0) { // nothing to compute: every input that is needed
        for (size_t j = 0; j < m->inputs.len; j++) {
            if (needed[m->inputs.data[j]->id]) {
                char ty[256];
                io_format(&rn->in_io[j], ty, sizeof ty);
                dl_diag(rn->d, DL_SEV_ERROR, DL_NO_LOC,
                        "missing input '%s': expected %s (give it with --in %s=PATH.npy)",
                        rn->in_io[j].name, ty, rn->in_io[j].name);
            }
        }
    }
    if (dl_diags_error_count(rn->d) > 0) {
        rc = dl_diags_oom(rn->d) ? EXIT_INTERNAL : EXIT_INPUT;
    } else if (dl_ir_module_keep_outputs(m, keep, n_keep) != DL_OK) {
        rc = EXIT_INTERNAL;
    } else {
        rn->is_pruned = true;
        rn->n_out = m->outputs.len;
        for (size_t j = 0; j < rn->n_out; j++) {
            rn->out_io[j] = io_from_value(m->outputs.data[j]);
        }
    }
out:
    free(live);
    free(needed);
    free(keep);
    free(missing);
    return rc;
}

static int run_read_inputs(const run_opts *o, run_state *rn) {
    dl_status st = DL_OK;
    // 3. Inputs: names first (cheap, and the clearest errors), then the files.
    rn->in_t = dl_mem_calloc(rn->n_in ? rn->n_in : 1, sizeof *rn->in_t);
    rn->stepped = dl_mem_calloc(rn->n_in ? rn->n_in : 1, sizeof *rn->stepped);
    int *given =
        dl_mem_calloc(rn->n_in ? rn->n_in : 1, sizeof *given); // index into ins + 1; 0 = missing
    if (!rn->in_t || !given || !rn->stepped) {
        free(given);
        return EXIT_INTERNAL;
    }
    for (size_t k = 0; k < o->ins.len; k++) {
        size_t j = 0;
        while (j < rn->n_in && strcmp(rn->in_io[j].name, o->ins.data[k].name) != 0) {
            j++;
        }
        if (j == rn->n_in) {
            dl_strbuf names = {0};
            io_list_names(&names, rn->in_io, rn->n_in);
            dl_diag(rn->d, DL_SEV_ERROR, DL_NO_LOC,
                    "--in %s: model '%s' has no input named '%s' (inputs: %s)", o->ins.data[k].name,
                    rn->model_name, o->ins.data[k].name, names.data ? names.data : "?");
            dl_strbuf_fini(&names);
        } else {
            given[j] = (int)k + 1;
        }
    }
    // --entry train_step needs every input. The infer entry point needs those the outputs asked
    // for depend on: for a .dlg that is decided below (run_keep_outputs), for an artifact by
    // what its infer reads (all of its outputs are computed).
    bool any_missing = false;
    for (size_t j = 0; j < rn->n_in; j++) {
        any_missing |= !given[j];
        if (!given[j] && (o->train || (rn->rtm && dlrt_model_infer_reads_input(rn->rtm, j)))) {
            char ty[256];
            io_format(&rn->in_io[j], ty, sizeof ty);
            dl_diag(rn->d, DL_SEV_ERROR, DL_NO_LOC,
                    "missing input '%s': expected %s (give it with --in %s=PATH.npy)",
                    rn->in_io[j].name, ty, rn->in_io[j].name);
        }
    }
    for (size_t k = 0; k < o->outs.len; k++) {
        size_t j = 0;
        while (j < rn->n_out && strcmp(rn->out_io[j].name, o->outs.data[k].name) != 0) {
            j++;
        }
        if (j == rn->n_out) {
            dl_strbuf names = {0};
            io_list_names(&names, rn->out_io, rn->n_out);
            dl_diag(rn->d, DL_SEV_ERROR, DL_NO_LOC,
                    "--out %s: model '%s' has no output named '%s' (outputs: %s)",
                    o->outs.data[k].name, rn->model_name, o->outs.data[k].name,
                    names.data ? names.data : "?");
            dl_strbuf_fini(&names);
        }
    }
    if (any_missing && !o->train && rn->m) {
        int rc = run_keep_outputs(o, rn, given);
        if (rc != EXIT_OK) {
            free(given);
            return rc;
        }
    }
    if (dl_diags_error_count(rn->d) == 0) {
        for (size_t j = 0; j < rn->n_in; j++) {
            if (!given[j]) {
                continue; // not needed (checked above): in_t[j] stays empty
            }
            const io_arg *io = &o->ins.data[given[j] - 1];
            char err[512];
            st = dl_npy_read(io->path, &rn->in_t[j], err, sizeof err);
            if (st != DL_OK) {
                file_diag(rn->d, io->path, "%s", err);
                continue;
            }
            if (o->train && !io_matches(&rn->in_t[j], &rn->in_io[j])) {
                // --entry train_step: [K', ...shape] with K' >= K gives one batch per step.
                char want[256], got[256];
                io_format(&rn->in_io[j], want, sizeof want);
                tensor_type_format(&rn->in_t[j], got, sizeof got);
                if (rn->in_t[j].dtype != rn->in_io[j].dtype) {
                    dl_diag(rn->d, DL_SEV_ERROR, DL_NO_LOC,
                            "input '%s': expected dtype %s, got %s (from %s; nothing is "
                            "converted)",
                            rn->in_io[j].name, dl_dtype_name(rn->in_io[j].dtype),
                            dl_dtype_name(rn->in_t[j].dtype), io->path);
                } else if (!io_matches_stepped(&rn->in_t[j], &rn->in_io[j], o->steps)) {
                    dl_diag(rn->d, DL_SEV_ERROR, DL_NO_LOC,
                            "input '%s': expected %s, or [K, ...] with K >= %ld steps, got %s "
                            "(from %s)",
                            rn->in_io[j].name, want, o->steps, got, io->path);
                } else {
                    rn->stepped[j] = true;
                }
            } else if (!io_matches(&rn->in_t[j], &rn->in_io[j])) {
                char want[256], got[256];
                io_format(&rn->in_io[j], want, sizeof want);
                tensor_type_format(&rn->in_t[j], got, sizeof got);
                dl_diag(rn->d, DL_SEV_ERROR, DL_NO_LOC, "input '%s': expected %s, got %s (from %s)",
                        rn->in_io[j].name, want, got, io->path);
            }
        }
    }
    free(given);
    if (dl_diags_error_count(rn->d) > 0) {
        return dl_diags_oom(rn->d) ? EXIT_INTERNAL : EXIT_INPUT;
    }
    return EXIT_OK;
}

// 4. Run everything before writing anything: a .dlg is compiled now that its inputs are
// known to be right.
static int run_compile(run_opts *o, run_state *rn) {
    size_t art_len = 0;
    dl_status st = DL_OK;
    if (!o->use_ref && !rn->rtm) {
        dlcc_result res;
        if (!options_set_binds(&o->copts, o->binds.data, o->binds.len, &rn->cbinds)) {
            return EXIT_INTERNAL;
        }
        // A module that keeps only some outputs is compiled as it is (binds applied already).
        st = rn->is_pruned ? dlcc_compile_module(rn->m, o->file, &o->copts, rn->d, &res)
                           : dlcc_compile_file(o->file, &o->copts, rn->d, &res);
        if (o->verbose && st == DL_OK) {
            print_cache_line(&res);
        }
        if (!cli_flush_diags(rn->d)) { // cache warnings come before anything the run prints
            return EXIT_INTERNAL;
        }
        if (st != DL_OK) {
            return cli_status_exit(st);
        }
        rn->art = res.artifact;
        art_len = res.artifact_len;
        dlrt_status rs = dlrt_model_load_memory(rn->art, art_len, &rn->rtm);
        if (rs != DLRT_OK) {
            rt_diag(rn->d, o->file, rs);
            return EXIT_INTERNAL;
        }
    }
    return EXIT_OK;
}

// The name of the tensor of checkpoint `path` that lands on model param `want` under map's rules
// (want itself without rules) into buf. Error (exit code) into d: no tensor does, or two do.
static int mapped_param_source(const char *path, const load_map *map, const char *want, char *buf,
                               size_t size, dl_diags *d) {
    snprintf(buf, size, "%s", want);
    if (map->n == 0) {
        return EXIT_OK;
    }
    dl_st_file *f = NULL;
    char why[256];
    if (dl_st_open(path, &f, why, sizeof why) != DL_OK) {
        file_diag(d, path, "%s", why);
        return EXIT_INPUT;
    }
    int found = 0;
    for (size_t i = 0; i < dl_st_count(f); i++) {
        dl_st_tensor_info info;
        char mapped[512];
        if (dl_st_info(f, i, &info) != DL_OK ||
            !dl_st_rule_apply(map->st_rules, map->n, info.name, mapped, sizeof mapped) ||
            strcmp(mapped, want) != 0) {
            continue;
        }
        if (found++) {
            file_diag(d, path, "'%s' and '%s' both land on param '%s' under --map", buf, info.name,
                      want);
            break;
        }
        snprintf(buf, size, "%s", info.name);
    }
    dl_st_close(f);
    if (found == 0) {
        file_diag(d, path, "param '%s': no tensor of the checkpoint is '%s' under --map's rules",
                  want, want);
    }
    return found == 1 ? EXIT_OK : EXIT_INPUT;
}

// Reads param `want` from the safetensors checkpoint `path` (its tensors renamed by map's rules)
// into *out and checks its dtype and shape. Optimizer state in the file is simply not read; a
// missing param is an error (a model run with some params at their initial values would predict
// garbage without saying so).
static int run_read_param(const char *path, const load_map *map, const io_desc *want,
                          dl_tensor *out, dl_diags *d) {
    char err[512], src[512];
    int rc = mapped_param_source(path, map, want->name, src, sizeof src, d);
    if (rc != EXIT_OK) {
        return rc;
    }
    dl_status st = dl_safetensors_read_tensor(path, src, out, err, sizeof err);
    if (st != DL_OK) {
        file_diag(d, path, "param '%s': %s", want->name, err);
        return st == DL_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
    }
    if (!io_matches(out, want)) {
        char w[256], g[256];
        io_format(want, w, sizeof w);
        tensor_type_format(out, g, sizeof g);
        if (strcmp(src, want->name) != 0) {
            file_diag(d, path,
                      "param '%s' (the checkpoint's '%s'): the model has %s, the "
                      "checkpoint %s",
                      want->name, src, w, g);
        } else {
            file_diag(d, path, "param '%s': the model has %s, the checkpoint %s", want->name, w, g);
        }
        dl_tensor_free(out);
        return EXIT_INPUT;
    }
    return EXIT_OK;
}

// The infer entry point, in the reference evaluator or compiled.
static int run_infer(const run_opts *o, run_state *rn) {
    int rc = EXIT_OK;
    dl_status st = DL_OK;
    rn->out_t = dl_mem_calloc(rn->n_out ? rn->n_out : 1, sizeof *rn->out_t);
    if (!rn->out_t) {
        return EXIT_INTERNAL;
    }
    if (o->use_ref) {
        // Inputs no kept output reads (run_keep_outputs) are zeros of their declared type.
        for (size_t j = 0; j < rn->n_in; j++) {
            if (!rn->in_t[j].data &&
                dl_tensor_alloc(&rn->in_t[j], rn->in_io[j].dtype, rn->in_io[j].rank,
                                rn->in_io[j].dims) != DL_OK) {
                return EXIT_INTERNAL;
            }
        }
        dl_ir_eval_opts opts = {NULL, 0, false};
        if (o->init_params) {
            size_t np = rn->m->params.len;
            rn->params = dl_mem_calloc(np ? np : 1, sizeof *rn->params);
            if (!rn->params) {
                return EXIT_INTERNAL;
            }
            rn->n_params = np;
            for (size_t i = 0; i < np; i++) {
                io_desc want = io_from_value(rn->m->params.data[i]);
                if ((rc = run_read_param(o->init_params, &rn->map, &want, &rn->params[i], rn->d)) !=
                    EXIT_OK) {
                    return rc;
                }
            }
            opts.params = rn->params;
            opts.n_params = np;
        }
        st = dl_ir_eval(rn->m, &opts, rn->in_t, rn->out_t, rn->d);
        if (st != DL_OK) {
            if (dl_diags_error_count(rn->d) == 0) {
                dl_diag(rn->d, DL_SEV_ERROR, DL_NO_LOC, "evaluation failed (%s)",
                        dl_status_str(st));
            }
            return cli_status_exit(st);
        }
        rn->n_out_t = rn->n_out;
    } else {
        dlrt_status rs = exec_session_create(rn->rtm, &o->xa, &rn->sess);
        for (size_t i = 0; rs == DLRT_OK && o->init_params && i < dlrt_model_num_params(rn->rtm);
             i++) {
            dlrt_tensor_desc td;
            (void)dlrt_model_param(rn->rtm, i, &td);
            io_desc want = io_from_rt(&td);
            dl_tensor t = {0};
            if ((rc = run_read_param(o->init_params, &rn->map, &want, &t, rn->d)) != EXIT_OK) {
                return rc;
            }
            rs = dlrt_session_set_param(rn->sess, want.name, t.data, dl_tensor_nbytes(&t));
            dl_tensor_free(&t);
        }
        for (size_t j = 0; rs == DLRT_OK && j < rn->n_in; j++) {
            if (!rn->in_t[j].data) {
                continue; // not given and not read by infer (checked when the inputs were read)
            }
            rs = dlrt_session_set_input(rn->sess, rn->in_io[j].name, rn->in_t[j].data,
                                        dl_tensor_nbytes(&rn->in_t[j]));
        }
        if (rs == DLRT_OK) {
            rs = dlrt_session_infer(rn->sess);
        }
        // Copied out (dlrt_session_output_copy works on every device; a CUDA output is GPU
        // memory).
        for (size_t j = 0; rs == DLRT_OK && j < rn->n_out; j++) {
            if (dl_tensor_alloc(&rn->out_t[j], rn->out_io[j].dtype, rn->out_io[j].rank,
                                rn->out_io[j].dims) != DL_OK) {
                rs = DLRT_ERR_NOMEM;
                break;
            }
            rn->n_out_t = j + 1;
            rs = dlrt_session_output_copy(rn->sess, rn->out_io[j].name, rn->out_t[j].data,
                                          dl_tensor_nbytes(&rn->out_t[j]));
        }
        if (rs != DLRT_OK) {
            rt_diag(rn->d, o->file, rs);
            return rs == DLRT_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
        }
        if ((rc = exec_session_finish(rn->d, rn->sess, &o->xa)) != EXIT_OK) {
            return rc;
        }
    }
    return EXIT_OK;
}

static int run_write_outputs(const run_opts *o, run_state *rn) {
    char **tmp_paths = NULL;
    int rc = EXIT_OK;
    dl_status st = DL_OK;
    // 5. Outputs. Each goes to a temporary file next to its target first; only when all of them
    // were written are they renamed into place, so a failure leaves every target untouched.
    if (o->outs.len == 0) {
        for (size_t j = 0; j < rn->n_out; j++) {
            print_preview(rn->out_io[j].name, &rn->out_t[j]);
        }
        return EXIT_OK;
    }
    tmp_paths = dl_mem_calloc(o->outs.len, sizeof *tmp_paths);
    if (!tmp_paths) {
        return EXIT_INTERNAL;
    }
    for (size_t k = 0; k < o->outs.len && rc == EXIT_OK; k++) {
        size_t j = 0;
        while (strcmp(rn->out_io[j].name, o->outs.data[k].name) != 0) {
            j++;
        }
        // A stream (/dev/null, a FIFO) cannot be left untouched nor replaced: written in place,
        // with no temporary file (dl_npy_write writes it where it stands).
        if (!dl_path_is_stream(o->outs.data[k].path)) {
            size_t plen = strlen(o->outs.data[k].path);
            tmp_paths[k] = dl_mem_alloc(plen + 32);
            if (!tmp_paths[k]) {
                rc = EXIT_INTERNAL;
                break;
            }
            snprintf(tmp_paths[k], plen + 32, "%s.dlcc-%ld-%zu.tmp", o->outs.data[k].path,
                     (long)getpid(), k);
        }
        st = dl_npy_write(tmp_paths[k] ? tmp_paths[k] : o->outs.data[k].path, &rn->out_t[j]);
        if (st != DL_OK) {
            file_diag(rn->d, o->outs.data[k].path, "cannot write: %s",
                      st == DL_ERR_IO ? strerror(errno) : dl_status_str(st));
            free(tmp_paths[k]);
            tmp_paths[k] = NULL;
            rc = cli_status_exit(st);
        }
    }
    for (size_t k = 0; k < o->outs.len && rc == EXIT_OK; k++) {
        if (!tmp_paths[k]) { // a stream, written already
            continue;
        }
        if (rename(tmp_paths[k], o->outs.data[k].path) != 0) {
            file_diag(rn->d, o->outs.data[k].path, "cannot write: %s", strerror(errno));
            rc = EXIT_INPUT;
        } else {
            free(tmp_paths[k]);
            tmp_paths[k] = NULL;
        }
    }
    for (size_t k = 0; k < o->outs.len; k++) {
        if (tmp_paths[k]) {
            unlink(tmp_paths[k]);
            free(tmp_paths[k]);
        }
    }
    free(tmp_paths);
    return rc;
}

static int run_normalize(const char *ckpt, run_state *rn);

static int cmd_run(int argc, char **argv) {
    run_opts o;
    run_state rn;
    memset(&o, 0, sizeof o);
    memset(&rn, 0, sizeof rn);
    o.backend = "cpu";
    o.entry = "infer";
    o.steps = 1;
    o.max_skipped_n = DEFAULT_MAX_SKIPPED;
    dlcc_options_init(&o.copts);
    int rc = run_parse_args(argc, argv, &o);
    if (rc == EXIT_OK) {
        rc = run_check_args(&o);
    }
    if (rc == EXIT_OK && dl_diags_create(&rn.d) != DL_OK) {
        rc = EXIT_INTERNAL;
    }
    if (rc == EXIT_OK && o.map && load_map_read(o.map, rn.d, &rn.map) != DL_OK) {
        rc = dl_diags_oom(rn.d) ? EXIT_INTERNAL : EXIT_INPUT;
    }
    if (rc == EXIT_OK) {
        rc = run_load_model(&o, &rn);
    }
    if (rc == EXIT_OK) {
        rc = run_read_inputs(&o, &rn);
    }
    if (rc == EXIT_OK && o.init_params && !o.normalize) {
        rc = run_normalize(o.init_params, &rn);
    }
    if (rc == EXIT_OK) {
        rc = run_compile(&o, &rn);
    }
    if (rc == EXIT_OK && o.train) {
        run_train_args ra = {o.steps, o.init_params,   o.save_params,
                             &rn.map, o.max_skipped_n, o.detect_anomaly};
        rc = run_train_steps(rn.d, o.file, rn.rtm, rn.m, rn.in_io, rn.in_t, rn.stepped, rn.n_in,
                             &ra, &o.xa, o.verbose);
    } else if (rc == EXIT_OK) {
        rc = run_infer(&o, &rn);
        if (rc == EXIT_OK) {
            rc = run_write_outputs(&o, &rn);
        }
    }
    if (rn.d && !cli_flush_diags(rn.d)) {
        rc = EXIT_INTERNAL;
    }
    run_state_fini(&rn);
    run_opts_fini(&o);
    fflush(stdout);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// dlcc compile

// --dump-after: each dump goes to stdout as it comes (dl_pass_dump_fn).
static void print_dump(void *ctx, dl_pass_id pass, const char *text) {
    (void)ctx;
    (void)pass;
    fputs(text, stdout);
}

// FILE.dlg -> FILE.so (any other name gets .so appended).
static char *default_artifact_path(const char *file) {
    size_t n = strlen(file);
    char *p = dl_mem_alloc(n + 4);
    if (!p) {
        return NULL;
    }
    memcpy(p, file, n + 1);
    if (n > 4 && strcmp(file + n - 4, ".dlg") == 0) {
        strcpy(p + n - 4, ".so");
    } else {
        strcat(p, ".so");
    }
    return p;
}

// `dlcc compile --target` (no value, list or help): the targets codegen knows.
static int print_targets(void) {
    size_t n = 0;
    const dl_cg_target_info *t = dl_cg_target_list(&n);
    printf("targets (dlcc compile --target NAME; default: %s):\n", t[0].name);
    for (size_t i = 0; i < n; i++) {
        printf("  %-12s %s\n", t[i].name, t[i].summary);
        if (t[i].levels) {
            printf("  %-12s CPU levels (--cpu):", "");
            for (const char *const *l = t[i].levels; *l; l++) {
                printf("%s %s", l == t[i].levels ? "" : ",", *l);
            }
            printf("\n");
        }
    }
    return EXIT_OK;
}

static int cmd_compile(int argc, char **argv) {
    cli_args a = {"compile", argc, argv, 0, false};
    const char *file = NULL, *out_path = NULL, *opt = NULL, *repeat_arg = NULL, *dump = NULL;
    char *def_out = NULL;
    bool verbose = false;
    DL_VEC(bind) binds = {0};
    dlcc_options o;
    dlcc_options_init(&o);
    dlcc_bind *cbinds = NULL;
    dlcc_result res;
    memset(&res, 0, sizeof res);
    dl_diags *d = NULL;
    long repeat = 0;
    int rc = EXIT_OK;
    while (a.i < argc) {
        const char *arg = argv[a.i];
        const char *val = NULL;
        int r;
        if (!a.no_more_flags && strcmp(arg, "--") == 0) {
            a.no_more_flags = true;
            a.i++;
        } else if (!cli_is_flag(&a)) {
            if (file) {
                rc = cli_usage_error("compile", "one model file at a time ('%s' and '%s')", file,
                                     arg);
                goto out;
            }
            file = arg;
            a.i++;
        } else if (strcmp(arg, "--target") == 0 && a.i + 1 == argc) {
            rc = print_targets(); // --target with no value lists them
            goto out;
        } else if ((r = cli_take_flag(&a, "-D", NULL, true, &val)) != 0) {
            bind b;
            if (r < 0 || (rc = parse_define("compile", val, &b)) != EXIT_OK) {
                rc = EXIT_USAGE;
                goto out;
            }
            if (!DL_VEC_PUSH(&binds, b)) {
                rc = EXIT_INTERNAL;
                goto out;
            }
        } else if ((r = cli_take_flag(&a, "-o", "--output", true, &out_path)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--target", true, &o.cg.target)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--cpu", true, &o.cg.cpu)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--features", true, &o.cg.features)) != 0 ||
                   (r = cli_take_flag(&a, "-O", NULL, true, &opt)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--bench-repeat", true, &repeat_arg)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--dump-after", true, &dump)) != 0 ||
                   (r = take_cache_flag(&a, &o)) != 0) {
            if (r < 0) {
                rc = EXIT_USAGE;
                goto out;
            }
        } else if (cli_take_flag(&a, "-v", "--verbose", false, NULL) == 1) {
            verbose = true;
        } else if (cli_take_flag(&a, NULL, "--verify-each", false, NULL) == 1) {
            o.verify_each = true;
        } else if (cli_take_flag(&a, NULL, "--no-prepack", false, NULL) == 1) {
            o.cg.no_prepack = true;
        } else {
            rc = cli_usage_error("compile", "unknown flag '%s'", arg);
            goto out;
        }
    }
    if (o.cg.target && (strcmp(o.cg.target, "list") == 0 || strcmp(o.cg.target, "help") == 0)) {
        rc = print_targets();
        goto out;
    }
    if (!file) {
        rc = cli_usage_error("compile", "no model file");
        goto out;
    }
    if (opt) {
        if (strlen(opt) != 1 || opt[0] < '0' || opt[0] > '3') {
            rc = cli_usage_error("compile", "-O expects 0, 1, 2 or 3, got '%s'", opt);
            goto out;
        }
        o.cg.opt_level = opt[0] - '0';
    }
    if (dump) {
        dl_pass_id p;
        if (strcmp(dump, "all") == 0) {
            o.dump_all = true;
        } else if (dl_pass_from_name(dump, &p)) {
            o.dump_after = (int)p;
        } else {
            rc = cli_usage_error("compile", "--dump-after expects all or a pass (%s), got '%s'",
                                 dl_pass_names(), dump);
            goto out;
        }
        o.dump = print_dump;
    }
    if (repeat_arg) {
        char *end = NULL;
        repeat = strtol(repeat_arg, &end, 10);
        if (*repeat_arg == 0 || *end != 0 || repeat < 1 || repeat > 100000) {
            rc = cli_usage_error("compile", "--bench-repeat expects 1..100000, got '%s'",
                                 repeat_arg);
            goto out;
        }
    }
    char oerr[256];
    if (dl_cg_options_check(&o.cg, oerr, sizeof oerr) != DL_OK) {
        rc = cli_usage_error("compile", "%s", oerr);
        goto out;
    }
    if (!out_path) {
        out_path = def_out = default_artifact_path(file);
        if (!def_out) {
            rc = EXIT_INTERNAL;
            goto out;
        }
    }
    if (dl_diags_create(&d) != DL_OK || !options_set_binds(&o, binds.data, binds.len, &cbinds)) {
        rc = EXIT_INTERNAL;
        goto out;
    }
    dl_status st = dlcc_compile_file(file, &o, d, &res);
    // Hidden benchmark flag (bench/cache_bench.sh): repeats the whole compile-or-fetch call and
    // prints the fastest, e.g. "bench: 200 runs, min 1.234 ms, cache hit".
    if (st == DL_OK && repeat > 0) {
        double best = res.total_ms;
        for (long i = 1; i < repeat && st == DL_OK; i++) {
            dlcc_result again;
            dl_diags_clear(d);
            st = dlcc_compile_file(file, &o, d, &again);
            if (st == DL_OK) {
                best = again.total_ms < best ? again.total_ms : best;
                free(again.artifact);
            }
        }
        printf("bench: %ld runs, min %.3f ms, cache %s\n", repeat, best,
               !res.cache_used ? "off"
               : res.cache_hit ? "hit"
                               : "miss");
    }
    if (st == DL_OK && dl_write_file_atomic(out_path, res.artifact, res.artifact_len) != DL_OK) {
        file_diag(d, out_path, "cannot write the artifact: %s", strerror(errno));
        st = DL_ERR_IO;
    }
    if (st == DL_OK && verbose) {
        char target[256];
        dl_cg_target_describe(&o.cg, target, sizeof target);
        print_cache_line(&res);
        if (res.cache_hit) {
            fprintf(stderr, "dlcc: fetched %s for %s from the cache in %.1f ms, -O%d, LLVM %s\n",
                    file, target, res.total_ms, o.cg.opt_level, dl_cg_llvm_version());
        } else {
            fprintf(stderr,
                    "dlcc: compiled %s for %s in %.1f ms (front end + codegen %.1f ms), -O%d, "
                    "LLVM %s\n",
                    file, target, res.total_ms, res.compile_ms, o.cg.opt_level,
                    dl_cg_llvm_version());
        }
        fprintf(stderr, "dlcc: wrote %s (%zu bytes)\n", out_path, res.artifact_len);
        // The memory plan: the session arena against the plain sum of every buffer's size.
        dlrt_model *rm = NULL;
        if (dlrt_model_load_memory(res.artifact, res.artifact_len, &rm) == DLRT_OK) {
            uint64_t arena = 0, sum = 0;
            dlrt_model_memory(rm, &arena, &sum);
            fprintf(stderr,
                    "dlcc: memory plan: arena %llu bytes for %llu bytes of buffers (%.1f%%)%s\n",
                    (unsigned long long)arena, (unsigned long long)sum,
                    sum ? 100.0 * (double)arena / (double)sum : 100.0,
                    dlrt_model_has_train_step(rm) ? ", infer and train_step" : "");
            // The kernels per entry point; a fused kernel computes several IR ops (fusion pass).
            for (int e = 0; e <= dlrt_model_has_train_step(rm); e++) {
                uint32_t nk = 0, nf = 0, nops = 0;
                dlrt_model_kernels(rm, e, &nk, &nf, &nops);
                fprintf(stderr, "dlcc: %s: %u kernels for %u ops (%u fused kernels)\n",
                        e ? "train_step" : "infer", nk, nops, nf);
            }
            uint64_t packed = 0;
            uint32_t n_pack = dlrt_model_prepack(rm, &packed);
            if (n_pack > 0) {
                fprintf(stderr,
                        "dlcc: infer: weights prepacked by %u kernels into %llu bytes (when the "
                        "params change)\n",
                        n_pack, (unsigned long long)packed);
            }
            dlrt_model_release(rm);
        }
    }
    rc = cli_status_exit(st);
out:
    if (d && !cli_flush_diags(d)) {
        rc = EXIT_INTERNAL;
    }
    free(res.artifact);
    free(def_out);
    free(cbinds);
    free(binds.data);
    dl_diags_destroy(d);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// dlcc import

// The check `dlcc check` makes of a model without a train block: parse, shapes, verify. Run on
// the printed text before `dlcc import` writes it, so that it never writes a file that check
// rejects (the diagnostics point into that text).
static dl_status check_imported_text(const char *name, const char *text, dl_diags *d) {
    dl_ir_module *m = NULL;
    dl_pass_pipeline_opts po;
    dl_pass_pipeline_opts_init(&po);
    po.verify_each = true;
    dl_status st = dl_fe_parse(name, text, strlen(text), d, &m);
    if (st == DL_OK) {
        // With a train block (--train-loss), the training graph must derive too.
        st = dl_pass_pipeline_run(m, DL_PASS_SHAPES, m->train ? DL_PASS_AUTODIFF : DL_PASS_SHAPES,
                                  &po, d);
    }
    dl_ir_module_destroy(m);
    return st;
}

// `dlcc import --train-loss`: what to append so the imported model trains.
typedef struct import_train {
    const char *loss;      // "cross_entropy" or "mse"; NULL: no train block
    const char *labels;    // the new input's name (default "labels" / "target")
    const char *optimizer; // sgd, adam, adamw, rmsprop (default adam)
    const char *lr;        // as given, checked; NULL: the optimizer's default
    const char *output;    // the prediction: an output's name (default the first output)
} import_train;

// A name not yet used in m: base, else base_2, base_3, ...
static void fresh_name(const dl_ir_module *m, const char *base, char *buf, size_t size) {
    snprintf(buf, size, "%s", base);
    for (int k = 2; dl_ir_module_find(m, buf) || dl_ir_module_find_dim(m, buf) >= 0; k++) {
        snprintf(buf, size, "%s_%d", base, k);
    }
}

// Appends to the printed model an input for the labels (cross_entropy: int64 of the
// prediction's shape without its class dim 1; mse: the prediction's type), the loss over the
// prediction, `output` of it and a train block. m is the imported module (shapes are inferred
// here to learn the prediction's type). Errors (exit 1) into d, naming the ONNX file.
static dl_status append_train_block(dl_ir_module *m, const import_train *it, const char *file,
                                    dl_strbuf *b, dl_diags *d) {
    DL_TRY(dl_pass_pipeline_run(m, DL_PASS_SHAPES, DL_PASS_SHAPES, NULL, d));
    const dl_ir_value *pred = NULL;
    for (size_t i = 0; i < m->outputs.len && !pred; i++) {
        if (!it->output || strcmp(m->outputs.data[i]->name, it->output) == 0) {
            pred = m->outputs.data[i];
        }
    }
    if (!pred) {
        file_diag(d, file,
                  it->output ? "--output-name: the model has no output '%s'"
                             : "--train-loss: the model has no output%s",
                  it->output ? it->output : "");
        return DL_ERR_INVALID_ARG;
    }
    bool ce = strcmp(it->loss, "cross_entropy") == 0;
    char ty[256], lty[300], labels[128], loss[128];
    dl_ir_type_format(m, &pred->type, ty, sizeof ty);
    if (!dl_dtype_is_float(pred->type.dtype) || (ce && pred->type.rank < 2)) {
        file_diag(d, file, "--train-loss %s: output '%s' is %s; expected float%s", it->loss,
                  pred->name, ty, ce ? " [N, C, ...] (logits, classes in dim 1)" : "");
        return DL_ERR_SHAPE;
    }
    if (ce) {
        dl_ir_type t = pred->type;
        t.dtype = DL_DT_INT64;
        for (int32_t k = 1; k + 1 < t.rank; k++) {
            t.dims[k] = t.dims[k + 1];
        }
        t.rank--;
        dl_ir_type_format(m, &t, lty, sizeof lty);
    } else {
        snprintf(lty, sizeof lty, "%s", ty);
    }
    fresh_name(m, it->labels ? it->labels : ce ? "labels" : "target", labels, sizeof labels);
    if (it->labels && strcmp(labels, it->labels) != 0) {
        file_diag(d, file, "--labels: the model already has a value or dim named '%s'", it->labels);
        return DL_ERR_INVALID_ARG;
    }
    fresh_name(m, "loss", loss, sizeof loss);
    dl_strbuf_printf(b,
                     "\n# Appended by dlcc import --train-loss %s: the loss of output '%s' against "
                     "'%s'.\n",
                     it->loss, pred->name, labels);
    dl_strbuf_printf(b, "input  %s : %s\n", labels, lty);
    dl_strbuf_printf(b, "%s = %s <reduction = \"mean\"> (%s, %s)\n", loss,
                     ce ? "SoftmaxCrossEntropyLoss" : "MeanSquaredError", pred->name, labels);
    dl_strbuf_printf(b, "output %s\n\ntrain %s {\n  optimizer = %s", loss, loss,
                     it->optimizer ? it->optimizer : "adam");
    if (it->lr) {
        dl_strbuf_printf(b, " <lr = %s>", it->lr);
    }
    dl_strbuf_puts(b, "\n}\n");
    return b->data ? DL_OK : DL_ERR_NOMEM;
}

// Drops the notes of a successful import unless -v asked for them.
static void drop_notes(dl_diags *d) {
    for (size_t i = 0; i < dl_diags_count(d); i++) {
        if (dl_diags_get(d, i)->sev != DL_SEV_NOTE) {
            return; // a warning: keep everything, notes included, for context
        }
    }
    dl_diags_clear(d);
}

// Params with more than this many values leave the .dlg for a safetensors file beside it.
enum { IMPORT_INLINE_MAX = 1024 };

// The weights file beside OUT ("dir/model.dlg" -> "dir/model.safetensors", into buf) and the
// name the .dlg gives it (its base name: a file() path is relative to the .dlg's directory).
static bool weights_path(const char *out, char *buf, size_t size, const char **base) {
    const char *slash = strrchr(out, '/');
    const char *dot = strrchr(out, '.');
    size_t stem = dot && dot > (slash ? slash : out) ? (size_t)(dot - out) : strlen(out);
    int n = snprintf(buf, size, "%.*s.safetensors", (int)stem, out);
    if (n < 0 || (size_t)n >= size) {
        return false;
    }
    *base = strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf;
    return true;
}

// Moves every float param literal of more than IMPORT_INLINE_MAX values into `w` (tensors in
// `store`, which the caller frees after writing) and makes its initialiser file(BASE, NAME).
static dl_status externalise_weights(dl_ir_module *m, const char *base, dl_st_writer *w,
                                     dl_tensor *store, size_t *n_moved) {
    *n_moved = 0;
    for (size_t i = 0; i < m->params.len; i++) {
        dl_ir_value *v = m->params.data[i];
        dl_ir_init *in = v->init;
        if (!in || in->kind != DL_IR_INIT_LITERAL || !in->lit || in->lit->is_splat || !in->lit->f ||
            in->lit->n <= IMPORT_INLINE_MAX || !dl_dtype_is_float(v->type.dtype)) {
            continue;
        }
        int64_t dims[DL_MAX_RANK];
        for (int32_t k = 0; k < v->type.rank; k++) {
            dims[k] = v->type.dims[k].value;
        }
        dl_tensor *t = &store[*n_moved];
        DL_TRY(dl_tensor_alloc(t, v->type.dtype, v->type.rank, dims));
        for (int64_t k = 0; k < in->lit->n; k++) {
            dl_tensor_set(t, k, in->lit->f[k]); // exact: the values came from this dtype
        }
        (*n_moved)++;
        DL_TRY(dl_st_writer_add(w, v->name, t));
        dl_ir_init *f = dl_ir_module_new_init(m, DL_IR_INIT_FILE);
        if (!f) {
            return DL_ERR_NOMEM;
        }
        f->path = dl_arena_strdup(&m->arena, base);
        f->tensor = dl_arena_strdup(&m->arena, v->name);
        if (!f->path || !f->tensor) {
            return DL_ERR_NOMEM;
        }
        f->loc = in->loc;
        v->init = f;
    }
    return DL_OK;
}

static int cmd_import(int argc, char **argv) {
    cli_args a = {"import", argc, argv, 0, false};
    const char *file = NULL, *out_path = NULL;
    bool consts = false, verbose = false, inline_weights = false;
    import_train it = {0};
    dl_diags *d = NULL;
    dl_ir_module *m = NULL;
    char *text = NULL;
    dl_st_writer *w = NULL;
    dl_tensor *store = NULL;
    size_t n_moved = 0;
    char wpath[4096];
    const char *wbase = NULL;
    int rc = EXIT_OK;
    while (a.i < argc) {
        const char *arg = argv[a.i];
        int r;
        if (!a.no_more_flags && strcmp(arg, "--") == 0) {
            a.no_more_flags = true;
            a.i++;
        } else if (!cli_is_flag(&a)) {
            if (file) {
                rc = cli_usage_error("import", "one model file at a time ('%s' and '%s')", file,
                                     arg);
                goto out;
            }
            file = arg;
            a.i++;
        } else if ((r = cli_take_flag(&a, "-o", "--output", true, &out_path)) != 0) {
            if (r < 0) {
                rc = EXIT_USAGE;
                goto out;
            }
        } else if (cli_take_flag(&a, NULL, "--consts", false, NULL) == 1) {
            consts = true;
        } else if (cli_take_flag(&a, NULL, "--inline-weights", false, NULL) == 1) {
            inline_weights = true;
        } else if ((r = cli_take_flag(&a, NULL, "--train-loss", true, &it.loss)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--labels", true, &it.labels)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--optimizer", true, &it.optimizer)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--lr", true, &it.lr)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--output-name", true, &it.output)) != 0) {
            if (r < 0) {
                rc = EXIT_USAGE;
                goto out;
            }
        } else if (cli_take_flag(&a, "-v", "--verbose", false, NULL) == 1) {
            verbose = true;
        } else {
            rc = cli_usage_error("import", "unknown flag '%s'", arg);
            goto out;
        }
    }
    if (!file) {
        rc = cli_usage_error("import", "no ONNX model file");
        goto out;
    }
    static const char *const losses[] = {"cross_entropy", "mse"};
    static const char *const optimizers[] = {"sgd", "adam", "adamw", "rmsprop"};
    if (it.loss && !in_list(it.loss, losses, DL_ARRAY_LEN(losses))) {
        rc = cli_usage_error("import", "--train-loss: unknown loss '%s' (cross_entropy, mse)",
                             it.loss);
        goto out;
    }
    if (!it.loss && (it.labels || it.optimizer || it.lr || it.output)) {
        rc = cli_usage_error("import",
                             "--labels, --optimizer, --lr and --output-name go with --train-loss");
        goto out;
    }
    if (it.optimizer && !in_list(it.optimizer, optimizers, DL_ARRAY_LEN(optimizers))) {
        rc = cli_usage_error("import",
                             "--optimizer: unknown optimizer '%s' (sgd, adam, adamw, rmsprop)",
                             it.optimizer);
        goto out;
    }
    if (it.lr) {
        char *end = NULL;
        errno = 0;
        double v = strtod(it.lr, &end);
        if (!*it.lr || *end || errno || !isfinite(v) || v < 0) {
            rc = cli_usage_error("import", "--lr expects a finite number >= 0, got '%s'", it.lr);
            goto out;
        }
    }
    if (it.labels && !*it.labels) {
        rc = cli_usage_error("import", "--labels needs a name");
        goto out;
    }
    if (dl_diags_create(&d) != DL_OK) {
        rc = EXIT_INTERNAL;
        goto out;
    }
    if (out_path && !inline_weights && !weights_path(out_path, wpath, sizeof wpath, &wbase)) {
        rc = cli_usage_error("import", "-o: the path '%s' is too long", out_path);
        goto out;
    }
    dl_status st = dl_fe_import_onnx_shaped(file, consts, dl_pass_shape_node, d, &m);
    // Large weights go to OUT's .safetensors (written before OUT, removed if OUT fails).
    if (st == DL_OK && wbase) {
        store = dl_mem_calloc(m->params.len ? m->params.len : 1, sizeof *store);
        st = store ? dl_st_writer_create(&w) : DL_ERR_NOMEM;
        if (st == DL_OK) {
            st = externalise_weights(m, wbase, w, store, &n_moved);
        }
    }
    if (st == DL_OK) {
        st = dl_ir_print(m, &text);
    }
    if (st == DL_OK && it.loss) {
        dl_strbuf b = {0};
        dl_strbuf_puts(&b, text);
        st = append_train_block(m, &it, file, &b, d);
        free(text);
        text = b.data;
        if (st != DL_OK) {
            dl_strbuf_fini(&b);
            text = NULL;
        }
    }
    if (st == DL_OK) {
        st = check_imported_text(out_path ? out_path : "<stdout>", text, d);
        if (st != DL_OK) {
            file_diag(d, file, "the imported model does not check (%s); nothing written",
                      dl_status_str(st));
        } else if (!verbose) {
            drop_notes(d);
        }
    }
    if (st == DL_OK && n_moved > 0) {
        st = dl_st_write_file(w, wpath);
        if (st != DL_OK) {
            file_diag(d, wpath, "cannot write the weights: %s",
                      st == DL_ERR_IO ? strerror(errno) : dl_status_str(st));
        } else if (verbose) {
            fprintf(stderr, "dlcc: %zu param%s of more than %d values written to %s\n", n_moved,
                    n_moved == 1 ? "" : "s", IMPORT_INLINE_MAX, wpath);
        }
    }
    if (st == DL_OK) {
        if (out_path) {
            st = write_text_atomic(out_path, text, d);
            if (st != DL_OK && n_moved > 0) {
                unlink(wpath); // all or nothing
            }
        } else {
            fputs(text, stdout);
        }
    }
    if (st != DL_OK && dl_diags_error_count(d) == 0) {
        file_diag(d, file, "cannot import model (%s)", dl_status_str(st));
    }
    rc = cli_status_exit(st);
out:
    if (d && !cli_flush_diags(d)) {
        rc = EXIT_INTERNAL;
    }
    free(text);
    for (size_t i = 0; store && i < n_moved; i++) {
        dl_tensor_free(&store[i]);
    }
    free(store);
    dl_st_writer_destroy(w);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// dlcc train
//
// Trains a .dlg model with a `train` block on a labelled data set: the runtime's loaders read
// and check the files (uint8 pixels scaled into [0, 1], normalised with the training set's
// mean and std, labels checked against the model's classes), dlcc checks the sample size
// against the model, compiles the model through the cache with its batch dim bound to
// --batch, then runs epochs of shuffled
// full batches through dlrt_session_train_step, setting "lr" from the schedule before every
// step. Afterwards the infer entry point classifies the test set (argmax of the first float
// [batch, C] output) and the checkpoint, if asked for, is written last. Everything that can be
// checked (arguments, model interface, data files and shapes) is checked before the compile, so
// a mistake costs no training time; nothing is written unless training and testing succeeded.

// The learning-rate schedules, the loop and the test accuracy are the runtime's training loop
// (runtime/rt_trainloop.c, shared with samples/train_fmnist.c and the Python binding).

typedef DL_VEC(bind) bind_vec;

enum { TRAIN_MAX_NAMED = 64 };

// --data / --test-data NAME=FILE: a model input and its file.
typedef struct named_path {
    char name[128];
    const char *path; // into argv
} named_path;

// --normalize NAME[=per-channel|global]
typedef struct named_norm {
    char name[128];
    bool per_channel;
} named_norm;

typedef struct train_args {
    const char *file, *dataset, *test, *save, *init;
    long epochs;
    long batch;     // 0: the batch dim's value in the model
    exec_args exec; // --threads (0: the runtime's default), --profile, --profile-summary
    bool has_lr;
    double lr;
    dlrt_lr_schedule sched;
    long warmup; // -1: 5% of the total steps
    uint64_t seed;
    long limit;          // 0: all
    long loader_threads; // --loader-threads (producers)
    long prefetch;       // --prefetch (ring slots)
    long max_skipped;    // --max-skipped-steps (0: never stop)
    bool detect_anomaly; // --detect-anomaly
    bool verbose, dry_run;
    const char *comm; // --comm auto|mpi|none (NULL: auto)
    long chunks;      // --deterministic N: the ranks matched (one process: N chunks a step)
    bool has_seed;
    const char *log;     // --log FILE (.jsonl or .csv)
    long log_every;      // --log-every N (default 1)
    long save_every;     // --save-every N steps (0: none)
    double save_every_s; // --save-every Ts / Nm / Nh (0: none)
    const char *resume;  // --resume CKPT
    const char *map;     // --map FILE: the rename rules of --init's load
    int64_t start_step;  // the step a resumed run begins with (0: a fresh run)
    int argc;            // the arguments, for the resume command an interrupt prints
    char **argv;
    named_path data[TRAIN_MAX_NAMED], test_data[TRAIN_MAX_NAMED]; // --data, --test-data
    size_t n_data, n_test_data;
    named_norm norms[TRAIN_MAX_NAMED]; // --normalize NAME[=MODE]
    size_t n_norms;
    bool norm_none; // --normalize none: not even --dataset's default
} train_args;

// Data-parallel `dlcc train` (under `mpirun -np N`): the communicator, this process's rank and
// the number of ranks (1 and rank 0 without one).
typedef struct train_dp {
    dlrt_comm *comm;
    int rank, world;
} train_dp;

// --comm: mpi, none, or auto (the default): MPI when the process was started by mpirun with more
// than one rank (Open MPI's OMPI_COMM_WORLD_SIZE, else PMI_SIZE / PMIX_SIZE of other launchers).
static bool train_wants_mpi(const char *comm) {
    if (comm && strcmp(comm, "auto") != 0) {
        return strcmp(comm, "mpi") == 0;
    }
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < DL_ARRAY_LEN(vars); i++) {
        const char *v = getenv(vars[i]);
        if (v && atol(v) > 1) {
            return true;
        }
    }
    return false;
}

// What `dlcc train` needs to know about the model (pointers into the module).
typedef struct train_model {
    const dl_ir_value *x, *y; // data input (float [B, ...]) and label input (int [B])
    int32_t batch_sym;        // module dim index of B
    int64_t batch, per;       // B and the values per sample
    const dl_ir_value *out;   // first float output of shape [B, C], or NULL
    int64_t n_classes;        // C, 0 without `out`
    bool named;               // --data: every input bound by name (x and y may be NULL; y is
                              // the classifier's label input when there is one)
    const dl_ir_value *loss;  // the train block's loss when it is a float scalar output, or NULL
} train_model;

// The train block's loss when the model outputs it (a float scalar): what evaluation averages.
static const dl_ir_value *train_loss_output(const dl_ir_module *m) {
    for (size_t i = 0; i < m->outputs.len; i++) {
        const dl_ir_value *v = m->outputs.data[i];
        if (v == m->train->loss && v->type.dtype == DL_DT_FLOAT && v->type.rank == 0) {
            return v;
        }
    }
    return NULL;
}

// The first float output of shape [B, C] (the batch dim `batch`): a classifier's scores.
static void train_find_scores(const dl_ir_module *m, train_model *tm) {
    for (size_t i = 0; i < m->outputs.len; i++) {
        const dl_ir_value *v = m->outputs.data[i];
        if (v->type.dtype == DL_DT_FLOAT && v->type.rank == 2 &&
            v->type.dims[0].value == tm->batch && v->type.dims[1].value > 0) {
            tm->out = v;
            tm->n_classes = v->type.dims[1].value;
            return;
        }
    }
}

// --data's model: every input has the batch as its first dim (the first input's, a named dim)
// and a --data file; every --data name is an input. A classifier (an integer [B] input, the
// labels, and a float [B, C] output) gets its test accuracy. Errors (each problem, exit 1) into d.
static bool train_model_inspect_named(const dl_ir_module *m, const train_args *ta, dl_diags *d,
                                      train_model *tm) {
    memset(tm, 0, sizeof *tm);
    tm->named = true;
    const char *file = ta->file;
    if (!m->train) {
        file_diag(d, file, "model '%s' has no train block: dlcc train needs `train LOSS { ... }`",
                  m->name);
        return false;
    }
    char ty[256], ty0[256];
    bool ok = true;
    for (size_t i = 0; i < m->inputs.len; i++) {
        const dl_ir_value *v = m->inputs.data[i];
        dl_ir_type_format(m, &v->type, ty, sizeof ty);
        if (i == 0 && (v->type.rank < 1 || v->type.dims[0].sym < 0)) {
            file_diag(d, file,
                      "input '%s' is %s: its first dim must be a named dim (the batch, e.g. `dim "
                      "N = 64` and float[N, 784]); every input's first dim is the batch",
                      v->name, ty);
            return false;
        }
        if (i == 0) {
            tm->batch_sym = v->type.dims[0].sym;
            tm->batch = v->type.dims[0].value;
            snprintf(ty0, sizeof ty0, "%s", ty);
        } else if (v->type.rank < 1 || v->type.dims[0].sym != tm->batch_sym) {
            file_diag(d, file,
                      "input '%s' is %s: its first dim must be the batch %s (as input '%s' %s): "
                      "every input is a batch of samples",
                      v->name, ty, m->dims.data[tm->batch_sym].name, m->inputs.data[0]->name, ty0);
            ok = false;
        }
        if (v->type.dtype != DL_DT_FLOAT && v->type.dtype != DL_DT_INT32 &&
            v->type.dtype != DL_DT_INT64) {
            file_diag(d, file,
                      "input '%s' is %s: dlcc train --data loads float, int32 and int64 inputs",
                      v->name, ty);
            ok = false;
        }
        bool given = false;
        for (size_t k = 0; k < ta->n_data; k++) {
            given = given || strcmp(ta->data[k].name, v->name) == 0;
        }
        if (!given) {
            file_diag(d, file, "input '%s' (%s) has no data: give it with --data %s=FILE.npy",
                      v->name, ty, v->name);
            ok = false;
        }
        bool is_int = v->type.dtype == DL_DT_INT32 || v->type.dtype == DL_DT_INT64;
        if (is_int && v->type.rank == 1) {
            tm->y = tm->y ? tm->y : v; // the first integer [B] input: the labels
        } else if (v->type.dtype == DL_DT_FLOAT && !tm->x) {
            tm->x = v;
        }
    }
    for (size_t k = 0; k < ta->n_data + ta->n_test_data; k++) {
        const named_path *np = k < ta->n_data ? &ta->data[k] : &ta->test_data[k - ta->n_data];
        bool found = false;
        for (size_t i = 0; i < m->inputs.len && !found; i++) {
            found = strcmp(m->inputs.data[i]->name, np->name) == 0;
        }
        if (!found) {
            dl_strbuf b = {0};
            for (size_t i = 0; i < m->inputs.len; i++) {
                dl_strbuf_printf(&b, "%s%s", i ? ", " : "", m->inputs.data[i]->name);
            }
            file_diag(d, file, "%s %s=%s: model '%s' has no input '%s' (its inputs: %s)",
                      k < ta->n_data ? "--data" : "--test-data", np->name, np->path, m->name,
                      np->name, b.data ? b.data : "none");
            dl_strbuf_fini(&b);
            ok = false;
        }
    }
    if (!ok) {
        return false;
    }
    tm->loss = train_loss_output(m);
    if (tm->y) {
        train_find_scores(m, tm);
    }
    if (!tm->out) {
        tm->y = NULL; // no scores to judge: not a classifier
    }
    tm->per = 0;
    return true;
}

// Finds the data and label inputs and the batch dim. Errors (exit 1) into `d`.
static bool train_model_inspect(const dl_ir_module *m, const char *file, dl_diags *d,
                                train_model *tm) {
    memset(tm, 0, sizeof *tm);
    if (!m->train) {
        file_diag(d, file, "model '%s' has no train block: dlcc train needs `train LOSS { ... }`",
                  m->name);
        return false;
    }
    char ty[256];
    for (size_t i = 0; i < m->inputs.len; i++) {
        const dl_ir_value *v = m->inputs.data[i];
        if (v->type.dtype == DL_DT_FLOAT && !tm->x) {
            tm->x = v;
        } else if ((v->type.dtype == DL_DT_INT64 || v->type.dtype == DL_DT_INT32) && !tm->y) {
            tm->y = v;
        }
    }
    if (m->inputs.len != 2 || !tm->x || !tm->y) {
        dl_strbuf b = {0};
        for (size_t i = 0; i < m->inputs.len; i++) {
            dl_ir_type_format(m, &m->inputs.data[i]->type, ty, sizeof ty);
            dl_strbuf_printf(&b, "%s%s: %s", i ? ", " : "", m->inputs.data[i]->name, ty);
        }
        file_diag(d, file,
                  "dlcc train needs a model with exactly two inputs, the data (float[B, ...]) "
                  "and the labels (int64[B] or int32[B]); model '%s' has %s",
                  m->name, b.data ? b.data : "none");
        dl_strbuf_fini(&b);
        return false;
    }
    if (tm->x->type.rank < 1 || tm->x->type.dims[0].sym < 0) {
        dl_ir_type_format(m, &tm->x->type, ty, sizeof ty);
        file_diag(d, file,
                  "data input '%s' is %s: its first dim must be a named dim (the batch, e.g. "
                  "`dim N = 64` and float[N, 784])",
                  tm->x->name, ty);
        return false;
    }
    tm->batch_sym = tm->x->type.dims[0].sym;
    tm->batch = tm->x->type.dims[0].value;
    if (tm->y->type.rank != 1 || tm->y->type.dims[0].value != tm->batch) {
        char xty[256];
        dl_ir_type_format(m, &tm->y->type, ty, sizeof ty);
        dl_ir_type_format(m, &tm->x->type, xty, sizeof xty);
        file_diag(d, file, "label input '%s' is %s: expected [%s] to match data input '%s' %s",
                  tm->y->name, ty, m->dims.data[tm->batch_sym].name, tm->x->name, xty);
        return false;
    }
    tm->per = 1;
    for (int32_t i = 1; i < tm->x->type.rank; i++) {
        tm->per *= tm->x->type.dims[i].value;
    }
    train_find_scores(m, tm);
    tm->loss = train_loss_output(m);
    return true;
}

// "v" or "[v0, v1, ...]": a loader's normalisation values, one per channel.
static void print_channels(FILE *f, const float *v, int n) {
    fputs(n > 1 ? "[" : "", f);
    for (int c = 0; c < n; c++) {
        fprintf(f, "%s%.6g", c ? ", " : "", (double)v[c]);
    }
    fputs(n > 1 ? "]" : "", f);
}

// ---- normalisation: a flag (--normalize, or --dataset's printed default), never silent; its
// values are stored in the checkpoint's metadata ("dlcc.normalize.INPUT" = "per-channel|global
// [u8/255] mean=V,V,... std=V,V,...") and reapplied by --init and --resume.

typedef struct train_norm {
    char input[128];
    bool per_channel;  // --dataset: the loader's per-channel for [C, H, W] samples, else global
    bool u8_unit;      // uint8 values / 255 first (--dataset's default)
    bool is_default;   // --dataset's default, not asked for
    const char *ckpt;  // the values come from this checkpoint (NULL: computed from the data)
    int n;             // values each (0 until known)
    float *mean, *std; // OWNED
} train_norm;

typedef struct train_norms {
    train_norm v[TRAIN_MAX_NAMED];
    size_t n;
} train_norms;

static void train_norms_fini(train_norms *ns) {
    for (size_t i = 0; i < ns->n; i++) {
        free(ns->v[i].mean);
        free(ns->v[i].std);
    }
    ns->n = 0;
}

static train_norm *train_norm_find(train_norms *ns, const char *input) {
    for (size_t i = 0; i < ns->n; i++) {
        if (strcmp(ns->v[i].input, input) == 0) {
            return &ns->v[i];
        }
    }
    return NULL;
}

static train_norm *train_norm_add(train_norms *ns, const char *input) {
    train_norm *nm = train_norm_find(ns, input);
    if (nm || ns->n == TRAIN_MAX_NAMED) {
        return nm;
    }
    nm = &ns->v[ns->n++];
    memset(nm, 0, sizeof *nm);
    snprintf(nm->input, sizeof nm->input, "%s", input);
    return nm;
}

// Sets nm's values (n each). False when out of memory.
static bool train_norm_set(train_norm *nm, const float *mean, const float *std, int n) {
    free(nm->mean);
    free(nm->std);
    nm->mean = dl_mem_alloc((size_t)n * sizeof(float) + 1);
    nm->std = dl_mem_alloc((size_t)n * sizeof(float) + 1);
    nm->n = nm->mean && nm->std ? n : 0;
    if (nm->n) {
        memcpy(nm->mean, mean, (size_t)n * sizeof(float));
        memcpy(nm->std, std, (size_t)n * sizeof(float));
    }
    return nm->n == n;
}

// "V,V,..." (each float's shortest exact form) onto b.
static void put_floats(dl_strbuf *b, const float *v, int n) {
    for (int c = 0; c < n; c++) {
        char num[32];
        dl_strbuf_printf(b, "%s%s", c ? "," : "", train_num((double)v[c], num, sizeof num));
    }
}

// The metadata value of nm (free it).
static char *train_norm_format(const train_norm *nm) {
    dl_strbuf b = {0};
    dl_strbuf_printf(&b, "%s%s mean=", nm->per_channel ? "per-channel" : "global",
                     nm->u8_unit ? " u8/255" : "");
    put_floats(&b, nm->mean, nm->n);
    dl_strbuf_puts(&b, " std=");
    put_floats(&b, nm->std, nm->n);
    return dl_strbuf_take(&b);
}

// "V,V,..." after `key` in val into a new array (*out, *n). False when malformed.
static bool parse_floats(const char *val, const char *key, float **out, int *n) {
    const char *p = strstr(val, key);
    *out = NULL;
    *n = 0;
    if (!p) {
        return false;
    }
    p += strlen(key);
    int cap = 1;
    for (const char *q = p; *q && *q != ' '; q++) {
        cap += *q == ',';
    }
    float *v = dl_mem_alloc((size_t)cap * sizeof(float));
    if (!v) {
        return false;
    }
    for (int c = 0; c < cap; c++) {
        char *end = NULL;
        errno = 0;
        v[c] = strtof(p, &end);
        if (end == p || errno || !isfinite(v[c]) || (*end != ',' && *end != ' ' && *end)) {
            free(v);
            return false;
        }
        p = *end == ',' ? end + 1 : end;
    }
    *out = v;
    *n = cap;
    return true;
}

// Reads the "dlcc.normalize.INPUT" metadata of the open checkpoint f (read from `path`) for
// input `name` into ns (nothing when the file has none). False (exit 1, in d) for a malformed
// value.
static bool train_norm_from_meta(dl_st_file *f, const char *path, const char *name, train_norms *ns,
                                 dl_diags *d) {
    char key[200];
    snprintf(key, sizeof key, "dlcc.normalize.%s", name);
    const char *val = dl_st_metadata(f, key);
    if (!val) {
        return true;
    }
    float *mean = NULL, *std = NULL;
    int nm_ = 0, ns_ = 0;
    bool pc = strncmp(val, "per-channel", 11) == 0;
    bool ok = (pc || strncmp(val, "global", 6) == 0) && parse_floats(val, "mean=", &mean, &nm_) &&
              parse_floats(val, "std=", &std, &ns_) && nm_ == ns_;
    for (int c = 0; ok && c < ns_; c++) {
        ok = std[c] > 0;
    }
    train_norm *nm = ok ? train_norm_add(ns, name) : NULL;
    if (nm) {
        nm->per_channel = pc;
        nm->u8_unit = strstr(val, " u8/255 ") != NULL;
        nm->ckpt = path;
        ok = train_norm_set(nm, mean, std, nm_);
    }
    if (!ok) {
        file_diag(d, path, "metadata %s is malformed: '%s'", key, val);
    }
    free(mean);
    free(std);
    return ok;
}

// Reads the "dlcc.normalize.INPUT" metadata of checkpoint `path` for each of the n inputs
// names(ctx, i) into ns (a file without them, or one that cannot be read, adds nothing: loading
// it reports the latter). False (exit 1, in d) for a malformed value.
static bool norms_from_ckpt(const char *path, const char *(*names)(const void *, size_t),
                            const void *ctx, size_t n, train_norms *ns, dl_diags *d) {
    dl_st_file *f = NULL;
    char why[256];
    if (dl_st_open(path, &f, why, sizeof why) != DL_OK) {
        return true;
    }
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        ok = train_norm_from_meta(f, path, names(ctx, i), ns, d);
    }
    dl_st_close(f);
    return ok;
}

static const char *module_input_name(const void *m, size_t i) {
    return ((const dl_ir_module *)m)->inputs.data[i]->name;
}

// The normalisations of the run into ns: the checkpoint's (--init / --resume) for the inputs it
// has them for, then --normalize's, then --dataset's default (uint8 / 255 and the per-channel
// statistics of the training set) unless --normalize none. Errors (exit code) into d.
static int train_norms_plan(const train_args *ta, const dl_ir_module *m, const train_model *tm,
                            train_norms *ns, dl_diags *d) {
    if (ta->norm_none) {
        return EXIT_OK;
    }
    const char *ckpt = ta->init ? ta->init : ta->resume;
    if (ckpt && !norms_from_ckpt(ckpt, module_input_name, m, m->inputs.len, ns, d)) {
        return EXIT_INPUT;
    }
    for (size_t k = 0; k < ta->n_norms; k++) {
        const named_norm *nn = &ta->norms[k];
        const dl_ir_value *v = NULL;
        for (size_t i = 0; i < m->inputs.len; i++) {
            v = strcmp(m->inputs.data[i]->name, nn->name) == 0 ? m->inputs.data[i] : v;
        }
        if (!v || v->type.dtype != DL_DT_FLOAT || (!tm->named && v != tm->x)) {
            char ty[256] = "";
            if (v) {
                dl_ir_type_format(m, &v->type, ty, sizeof ty);
                file_diag(d, ta->file, "--normalize %s: input '%s' is %s: only %s is normalised",
                          nn->name, nn->name, ty, tm->named ? "a float input" : "the data input");
            } else {
                file_diag(d, ta->file, "--normalize %s: model '%s' has no input '%s'", nn->name,
                          m->name, nn->name);
            }
            return EXIT_INPUT;
        }
        if (!tm->named && !nn->per_channel) {
            file_diag(d, ta->file,
                      "--normalize %s=global: --dataset normalises per channel ([C, H, W] "
                      "samples; one channel otherwise) or not at all (--normalize none); --data "
                      "%s=FILE.npy takes either",
                      nn->name, nn->name);
            return EXIT_INPUT;
        }
        train_norm *nm = train_norm_find(ns, nn->name);
        if (!nm) { // the checkpoint's values win: the params were trained on them
            nm = train_norm_add(ns, nn->name);
            nm->per_channel = nn->per_channel;
            nm->u8_unit = !tm->named;
        }
    }
    if (!tm->named && !train_norm_find(ns, tm->x->name) && ta->n_norms == 0) {
        train_norm *nm = train_norm_add(ns, tm->x->name);
        nm->per_channel = true;
        nm->u8_unit = true;
        nm->is_default = true;
    }
    return EXIT_OK;
}

// One line per normalisation (stderr): what is applied to which input, with which values.
// cmd: "train" or "run" (whose values always come from its --params checkpoint).
static void train_norms_print(const train_norms *ns, int64_t n_samples, const char *cmd) {
    for (size_t i = 0; i < ns->n; i++) {
        const train_norm *nm = &ns->v[i];
        bool run = strcmp(cmd, "run") == 0;
        fprintf(stderr, "dlcc %s: input '%s' normalised: %s%s, mean ", cmd, nm->input,
                nm->u8_unit && !run ? "uint8 values / 255, then " : "",
                nm->per_channel && nm->n > 1 ? "per channel" : "globally");
        print_channels(stderr, nm->mean, nm->n);
        fputs(" std ", stderr);
        print_channels(stderr, nm->std, nm->n);
        if (nm->ckpt) {
            fprintf(stderr, " (stored in %s)", nm->ckpt);
        } else {
            fprintf(stderr, " (of the %lld training samples)", (long long)n_samples);
        }
        if (run && nm->u8_unit) {
            fputs("; its values are taken as pixels / 255, as --dataset read them", stderr);
        }
        fputs(nm->is_default ? "; the --dataset default, --normalize none turns it off\n"
              : run          ? "; --normalize none turns it off\n"
                             : "\n",
              stderr);
    }
}

static const char *io_input_name(const void *ios, size_t i) {
    return ((const io_desc *)ios)[i].name;
}

// dlcc run --params CKPT: the inputs that CKPT's metadata says `dlcc train` normalised are
// normalised the same way, (x - mean[c]) / std[c] with c the first per-sample dim for
// per-channel values (a notice on stderr for each; --normalize none skips this). Inputs a
// stepped train_step file gives ([K, B, ...]) are normalised sample by sample as well.
static int run_normalize(const char *ckpt, run_state *rn) {
    train_norms ns = {0};
    int rc = EXIT_OK;
    if (!norms_from_ckpt(ckpt, io_input_name, rn->in_io, rn->n_in, &ns, rn->d)) {
        rc = dl_diags_oom(rn->d) ? EXIT_INTERNAL : EXIT_INPUT;
    }
    for (size_t j = 0; j < rn->n_in && rc == EXIT_OK; j++) {
        const io_desc *io = &rn->in_io[j];
        const train_norm *nm = train_norm_find(&ns, io->name);
        dl_tensor *t = &rn->in_t[j];
        if (!nm || !t->data) {
            continue; // no stored normalisation, or an input this run does not read
        }
        int64_t per_sample = 1;
        for (int k = 1; k < io->rank; k++) {
            per_sample *= io->dims[k];
        }
        int64_t ch = io->rank > 1 ? io->dims[1] : 1;
        if (t->dtype != DL_DT_FLOAT || (nm->n > 1 && nm->n != ch) || per_sample <= 0) {
            char ty[256];
            io_format(io, ty, sizeof ty);
            file_diag(rn->d, ckpt,
                      "input '%s' is %s: the checkpoint's normalisation of it (%d values) does "
                      "not apply (--normalize none skips it)",
                      io->name, ty, nm->n);
            rc = EXIT_INPUT;
            break;
        }
        int64_t per_ch = nm->n > 1 ? per_sample / nm->n : per_sample;
        float *x = t->data;
        int64_t n = dl_tensor_numel(t);
        for (int64_t i = 0; i < n; i++) {
            int c = nm->n > 1 ? (int)(i % per_sample / per_ch) : 0;
            x[i] = (x[i] - nm->mean[c]) / nm->std[c];
        }
    }
    if (rc == EXIT_OK) {
        train_norms_print(&ns, 0, "run");
    }
    train_norms_fini(&ns);
    return rc;
}

// ---- data: the runtime's loaders (runtime/rt_loader.c) read, check and normalise the files

// The samples of a loader must fit the model's data input. Error (exit 1) into `d`.
static bool split_check_sample(const dlrt_loader *ld, const char *x_path, const dl_ir_module *m,
                               const train_model *tm, dl_diags *d) {
    dlrt_loader_info li;
    dlrt_loader_info_get(ld, &li);
    if (li.sample_numel == tm->per) {
        return true;
    }
    char shp[200], ty[256];
    dl_shape_format(li.sample_dims, li.sample_rank, shp, sizeof shp);
    dl_ir_type_format(m, &tm->x->type, ty, sizeof ty);
    file_diag(d, x_path,
              "samples of shape %s (%lld values each) do not fit the model's data input '%s' "
              "%s (%lld values per sample)",
              shp, (long long)li.sample_numel, tm->x->name, ty, (long long)tm->per);
    return false;
}

// "npy:A,B" / "idx:A,B" -> A and B (in `buf`, which must outlive them). False if malformed.
static bool split_pair(const char *spec, const char *prefix, char *buf, size_t size, const char **a,
                       const char **b) {
    size_t pl = strlen(prefix);
    if (strncmp(spec, prefix, pl) != 0 || strlen(spec + pl) >= size) {
        return false;
    }
    strcpy(buf, spec + pl);
    char *comma = strchr(buf, ',');
    if (!comma || comma == buf || !comma[1] || strchr(comma + 1, ',')) {
        return false;
    }
    *comma = 0;
    *a = buf;
    *b = comma + 1;
    return true;
}

// The data set arguments, checked before any file is read.
typedef struct train_specs {
    enum { DS_FMNIST, DS_IDX, DS_NPY } kind;
    const char *fmnist_dir;
    char train_buf[4096], test_buf[4096];
    const char *train_x, *train_y, *test_x, *test_y; // NULL test: none
} train_specs;

static int train_specs_parse(const train_args *ta, train_specs *sp) {
    const char *ds = ta->dataset;
    if (strcmp(ds, "fashion-mnist") == 0 || strncmp(ds, "fashion-mnist:", 14) == 0) {
        sp->kind = DS_FMNIST;
        sp->fmnist_dir = ds[13] == ':' ? ds + 14 : dl_idx_default_fashion_mnist_dir();
        if (!*sp->fmnist_dir) {
            return cli_usage_error("train", "--dataset fashion-mnist:DIR needs a directory");
        }
        if (ta->test) {
            return cli_usage_error("train",
                                   "--test: the fashion-mnist data set brings its own test "
                                   "set (t10k); --test is for idx: and npy: data sets");
        }
        return EXIT_OK;
    }
    bool is_idx = strncmp(ds, "idx:", 4) == 0, is_npy = strncmp(ds, "npy:", 4) == 0;
    if (!is_idx && !is_npy) {
        return cli_usage_error("train",
                               "--dataset: unknown data set '%s' (expected fashion-mnist, "
                               "fashion-mnist:DIR, idx:IMAGES,LABELS or npy:X.npy,Y.npy)",
                               ds);
    }
    const char *prefix = is_idx ? "idx:" : "npy:";
    sp->kind = is_idx ? DS_IDX : DS_NPY;
    if (!split_pair(ds, prefix, sp->train_buf, sizeof sp->train_buf, &sp->train_x, &sp->train_y)) {
        return cli_usage_error("train", "--dataset expects %s%s, got '%s'", prefix,
                               is_idx ? "IMAGES,LABELS" : "X.npy,Y.npy", ds);
    }
    if (ta->test && !split_pair(ta->test, prefix, sp->test_buf, sizeof sp->test_buf, &sp->test_x,
                                &sp->test_y)) {
        return cli_usage_error("train",
                               "--test expects %s%s (the same kind as --dataset), got '%s'", prefix,
                               is_idx ? "IMAGES,LABELS" : "X.npy,Y.npy", ta->test);
    }
    return EXIT_OK;
}

// A loader over one IDX or .npy pair. Errors (the loader's message, naming the file) into `d`.
static int split_loader(const train_specs *sp, const char *xp, const char *yp,
                        const dlrt_loader_options *o, dl_diags *d, dlrt_loader **out) {
    dlrt_status rs = sp->kind == DS_NPY ? dlrt_loader_create_npy(xp, yp, o, out)
                                        : dlrt_loader_create_idx(xp, yp, o, out);
    if (rs != DLRT_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s", dlrt_last_error());
        return rs == DLRT_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
    }
    return EXIT_OK;
}

// The training loader's options: --batch rows, the --seed order, --epochs, --limit-train, this
// rank's shard, from the resumed step on, --loader-threads producers, --prefetch slots.
static dlrt_loader_options train_loader_options(const train_args *ta, const train_dp *dp,
                                                const train_model *tm) {
    dlrt_loader_options o;
    dlrt_loader_options_init(&o);
    o.batch_size = tm->batch;
    o.producers = (int)ta->loader_threads;
    o.slots = (int)ta->prefetch;
    o.seed = ta->seed;
    o.epochs = ta->epochs;
    o.limit = ta->limit;
    o.shard_count = dp->world; // data-parallel: this rank's shard (DistributedSampler's order)
    o.shard_index = dp->rank;
    o.start_batch = ta->start_step; // --resume: the batches from there on, as if never stopped
    if (ta->chunks > 1 && dp->world == 1) { // --deterministic N: the N ranks' shards, as chunks
        o.batch_size = tm->batch * ta->chunks;
        o.shard_count = ta->chunks;
        o.shard_index = DLRT_LOADER_ALL_SHARDS;
    }
    return o;
}

// The test loader's options from the training loader's: one epoch in file order, the last batch
// padded, every sample on every rank (their sessions are the same: rank 0 tests the whole set),
// batches of the model's batch `batch`.
static void test_loader_options(dlrt_loader_options *o, int64_t batch) {
    o->batch_size = batch;
    o->shuffle = 0;
    o->epochs = 1;
    o->limit = 0;
    o->start_batch = 0;
    o->shard_count = 1;
    o->shard_index = 0;
    o->producers = 1;
    o->last = DLRT_LOADER_PAD_LAST;
}

// The two loaders of a run. Training: --batch rows, a new order per epoch from --seed, the
// partial batch dropped, the first --limit-train samples, normalised with their own mean and std.
// Test (when there is a test split): file order, the last batch padded with rows that are not
// counted, normalised with the training values. Both: uint8 pixels into [0, 1], labels of the
// model's label type, in [0, C) when the model has a [B, C] output. Returns an exit code.
static int train_loaders(const train_specs *sp, const train_args *ta, const train_dp *dp,
                         dl_idx_mnist_paths *mp, const dl_ir_module *m, const train_model *tm,
                         train_norms *ns, dl_diags *d, dlrt_loader **train, dlrt_loader **test) {
    const char *paths[4] = {sp->train_x, sp->train_y, sp->test_x, sp->test_y};
    if (sp->kind == DS_FMNIST) {
        char err[1024];
        dl_status st = dl_idx_find_mnist_files(sp->fmnist_dir, mp, err, sizeof err);
        if (st != DL_OK) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "--dataset fashion-mnist: %s", err);
            return cli_status_exit(st);
        }
        paths[0] = mp->path[DL_IDX_TRAIN_IMAGES];
        paths[1] = mp->path[DL_IDX_TRAIN_LABELS];
        paths[2] = mp->path[DL_IDX_TEST_IMAGES];
        paths[3] = mp->path[DL_IDX_TEST_LABELS];
    }
    if (paths[2] && !tm->out) {
        file_diag(d, ta->file,
                  "model '%s' has no float output of shape [%s, C] (logits or probabilities) "
                  "to measure the test accuracy with",
                  m->name, m->dims.data[tm->batch_sym].name);
        return EXIT_INPUT;
    }
    dlrt_loader_options o = train_loader_options(ta, dp, tm);
    o.labels = tm->y->type.dtype == DL_DT_INT32 ? DLRT_INT32 : DLRT_INT64;
    o.n_classes = tm->n_classes;
    train_norm *nx = train_norm_find(ns, tm->x->name);
    o.u8_to_unit = nx && nx->u8_unit;
    o.norm = !nx     ? DLRT_LOADER_NORM_NONE
             : nx->n ? DLRT_LOADER_NORM_GIVEN
                     : DLRT_LOADER_NORM_COMPUTE;
    if (nx && nx->n > DLRT_LOADER_MAX_CHANNELS) {
        file_diag(d, nx->ckpt,
                  "%d normalisation channels for input '%s': --dataset takes at most %d", nx->n,
                  nx->input, DLRT_LOADER_MAX_CHANNELS);
        return EXIT_INPUT;
    }
    if (nx && nx->n) { // the checkpoint's values
        o.n_norm = nx->n;
        memcpy(o.mean, nx->mean, (size_t)nx->n * sizeof(float));
        memcpy(o.std, nx->std, (size_t)nx->n * sizeof(float));
    }
    int rc = split_loader(sp, paths[0], paths[1], &o, d, train);
    if (rc != EXIT_OK || !split_check_sample(*train, paths[0], m, tm, d)) {
        return rc != EXIT_OK ? rc : EXIT_INPUT;
    }
    dlrt_loader_info li;
    dlrt_loader_info_get(*train, &li);
    if (nx && !nx->n && !train_norm_set(nx, li.mean, li.std, li.n_channels)) {
        return EXIT_INTERNAL;
    }
    if (!paths[2]) {
        return EXIT_OK;
    }
    test_loader_options(&o, tm->batch);
    o.pad_label = 0;
    o.norm = DLRT_LOADER_NORM_GIVEN;
    o.n_norm = li.n_channels;
    memcpy(o.mean, li.mean, sizeof o.mean);
    memcpy(o.std, li.std, sizeof o.std);
    rc = split_loader(sp, paths[2], paths[3], &o, d, test);
    if (rc != EXIT_OK || !split_check_sample(*test, paths[2], m, tm, d)) {
        return rc != EXIT_OK ? rc : EXIT_INPUT;
    }
    return EXIT_OK;
}

// "1:02:03" or "2:03".
static void format_eta(double s, char *buf, size_t size) {
    long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
    if (t >= 3600) {
        snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    } else {
        snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
    }
}

static int rt_fail(dl_diags *d, const char *what, dlrt_status rs) {
    rt_diag(d, what, rs);
    return rs == DLRT_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
}

// dlrt_dtype of an input dlcc train --data loads (checked by train_model_inspect_named).
static dlrt_dtype train_input_dtype(const dl_ir_value *v) {
    return v->type.dtype == DL_DT_INT64   ? DLRT_INT64
           : v->type.dtype == DL_DT_INT32 ? DLRT_INT32
                                          : DLRT_FLOAT32;
}

// The path `paths` gives input `name`, or NULL.
static const char *named_path_of(const named_path *paths, size_t n, const char *name) {
    for (size_t k = 0; k < n; k++) {
        if (strcmp(paths[k].name, name) == 0) {
            return paths[k].path;
        }
    }
    return NULL;
}

// --data's loaders: one array per model input, in the model's order (array i feeds input i),
// each checked by the runtime against the input's dtype and per-sample shape. Training: as
// train_loaders; normalised as ns says (values computed from the training arrays unless the
// checkpoint gave them, then stored into ns). Test (--test-data, every input): file order, the
// last batch padded, the training values. Returns an exit code.
static int train_loaders_named(const train_args *ta, const train_dp *dp, const dl_ir_module *m,
                               const train_model *tm, train_norms *ns, dl_diags *d,
                               dlrt_loader **train, dlrt_loader **test) {
    size_t n = m->inputs.len;
    if (n > TRAIN_MAX_NAMED) {
        file_diag(d, ta->file, "model '%s' has %zu inputs: dlcc train --data takes at most %d",
                  m->name, n, TRAIN_MAX_NAMED);
        return EXIT_INPUT;
    }
    for (size_t i = 0; i < n && ta->n_test_data; i++) {
        const char *name = m->inputs.data[i]->name;
        if (!named_path_of(ta->test_data, ta->n_test_data, name)) {
            file_diag(d, ta->file,
                      "input '%s' has no test data: give it with --test-data %s=FILE.npy", name,
                      name);
            return EXIT_INPUT;
        }
    }
    if (ta->n_test_data && !tm->loss && !tm->out) {
        file_diag(d, ta->file,
                  "model '%s' outputs neither its loss nor class scores: nothing to evaluate the "
                  "test data by (add `output %s`)",
                  m->name, m->train->loss->name);
        return EXIT_INPUT;
    }
    dlrt_loader_array arr[TRAIN_MAX_NAMED];
    for (size_t i = 0; i < n; i++) {
        const dl_ir_value *v = m->inputs.data[i];
        dlrt_loader_array *a = &arr[i];
        dlrt_loader_array_init(a);
        a->name = v->name;
        a->path = named_path_of(ta->data, ta->n_data, v->name);
        a->dtype = train_input_dtype(v);
        a->sample_rank = v->type.rank > 1 ? v->type.rank - 1 : 1; // [B]: one value per sample
        a->sample_dims[0] = 1;
        for (int32_t q = 1; q < v->type.rank; q++) {
            a->sample_dims[q - 1] = v->type.dims[q].value;
        }
        a->n_classes = v == tm->y ? tm->n_classes : 0;
        train_norm *nm = train_norm_find(ns, v->name);
        if (nm) {
            a->norm = nm->n ? DLRT_LOADER_NORM_GIVEN : DLRT_LOADER_NORM_COMPUTE;
            a->per_channel = nm->per_channel;
            a->n_norm = nm->n;
            a->mean = nm->mean;
            a->std = nm->std;
        }
    }
    dlrt_loader_options o = train_loader_options(ta, dp, tm);
    dlrt_status rs = dlrt_loader_create_arrays(arr, n, &o, train);
    if (rs != DLRT_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s", dlrt_last_error());
        return rs == DLRT_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
    }
    for (size_t i = 0; i < n; i++) { // the values applied: computed, or the checkpoint's
        dlrt_loader_array_info ai;
        train_norm *nm = train_norm_find(ns, m->inputs.data[i]->name);
        if (nm && dlrt_loader_array_info_get(*train, i, &ai) == DLRT_OK && !nm->n &&
            !train_norm_set(nm, ai.mean, ai.std, ai.n_channels)) {
            return EXIT_INTERNAL;
        }
        if (nm) {
            arr[i].norm = DLRT_LOADER_NORM_GIVEN;
            arr[i].n_norm = nm->n;
            arr[i].mean = nm->mean;
            arr[i].std = nm->std;
        }
        arr[i].path = named_path_of(ta->test_data, ta->n_test_data, arr[i].name);
    }
    if (!ta->n_test_data) {
        return EXIT_OK;
    }
    test_loader_options(&o, tm->batch);
    rs = dlrt_loader_create_arrays(arr, n, &o, test);
    if (rs != DLRT_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s", dlrt_last_error());
        return rs == DLRT_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
    }
    return EXIT_OK;
}

// The test accuracy with the infer entry point (dlrt_evaluate) over the test loader (file order,
// the last batch padded with rows that are not counted), and the mean of the loss output over
// the full batches when the train block's loss is an output of the model (the log's eval_loss).
static int train_test(dlrt_session *s, const dl_ir_module *m, const train_model *tm,
                      dlrt_loader *ld, const char *file, dl_diags *d, dlrt_eval_result *r) {
    (void)m;
    const char *loss = tm->loss ? tm->loss->name : NULL;
    dlrt_status rs = dlrt_evaluate(s, ld, tm->x ? tm->x->name : NULL, tm->y ? tm->y->name : NULL,
                                   tm->out && tm->y ? tm->out->name : NULL, loss, r);
    if (rs != DLRT_OK) {
        return rt_fail(d, file, rs);
    }
    if (!tm->out || !tm->y) { // --data without a classifier: the test samples, counted here
        dlrt_loader_info li;
        dlrt_loader_info_get(ld, &li);
        r->total = li.n_samples;
    }
    if (loss && r->loss_samples > 0) {
        char lb[32];
        printf("test loss: %s (mean over %lld samples", num_prec(r->loss, 6, lb, sizeof lb),
               (long long)r->loss_samples);
        if (r->loss_samples < r->total) {
            printf(" in full batches; the %lld in the padded last batch are left out",
                   (long long)(r->total - r->loss_samples));
        }
        printf(")\n");
    } else if (loss) {
        printf("test loss: none (the %lld test samples make no full batch)\n", (long long)r->total);
    }
    if (tm->out && tm->y) {
        printf("test accuracy: %.4f (%lld/%lld)\n",
               r->total ? (double)r->correct / (double)r->total : 0.0, (long long)r->correct,
               (long long)r->total);
    }
    return EXIT_OK;
}

// --data / --test-data NAME=FILE into paths[*n]. Returns an exit code.
static int take_named_path(const char *flag, const char *val, named_path *paths, size_t *n) {
    const char *eq = strchr(val, '=');
    if (!eq || eq == val || !eq[1] || (size_t)(eq - val) >= sizeof paths[0].name) {
        return cli_usage_error(
            "train", "%s expects NAME=FILE (a model input and its .npy file), got '%s'", flag, val);
    }
    if (*n == TRAIN_MAX_NAMED) {
        return cli_usage_error("train", "more than %d %s arguments", TRAIN_MAX_NAMED, flag);
    }
    named_path *np = &paths[*n];
    snprintf(np->name, sizeof np->name, "%.*s", (int)(eq - val), val);
    np->path = eq + 1;
    for (size_t k = 0; k < *n; k++) {
        if (strcmp(paths[k].name, np->name) == 0) {
            return cli_usage_error("train", "%s %s: input '%s' is given twice (%s and %s)", flag,
                                   val, np->name, paths[k].path, np->path);
        }
    }
    (*n)++;
    return EXIT_OK;
}

// --normalize NAME[=per-channel|global] or --normalize none. Returns an exit code.
static int take_normalize(const char *val, train_args *ta) {
    if (strcmp(val, "none") == 0) {
        ta->norm_none = true;
        return EXIT_OK;
    }
    const char *eq = strchr(val, '=');
    size_t nl = eq ? (size_t)(eq - val) : strlen(val);
    const char *mode = eq ? eq + 1 : "per-channel";
    bool pc = strcmp(mode, "per-channel") == 0;
    if (nl == 0 || nl >= sizeof ta->norms[0].name || (!pc && strcmp(mode, "global") != 0)) {
        return cli_usage_error("train",
                               "--normalize expects NAME, NAME=per-channel, NAME=global or none, "
                               "got '%s'",
                               val);
    }
    if (ta->n_norms == TRAIN_MAX_NAMED) {
        return cli_usage_error("train", "more than %d --normalize arguments", TRAIN_MAX_NAMED);
    }
    named_norm *nn = &ta->norms[ta->n_norms++];
    snprintf(nn->name, sizeof nn->name, "%.*s", (int)nl, val);
    nn->per_channel = pc;
    return EXIT_OK;
}

// Parses `dlcc train`'s arguments into *ta and the -D list. Returns an exit code.
static int train_parse_args(int argc, char **argv, train_args *ta, dlcc_options *copts,
                            bind_vec *binds) {
    cli_args a = {"train", argc, argv, 0, false};
    const char *epochs = NULL, *batch = NULL, *lr = NULL, *sched = NULL, *warmup = NULL,
               *seed = NULL, *limit = NULL, *producers = NULL, *prefetch = NULL,
               *max_skipped = NULL, *log_every = NULL, *save_every = NULL, *det = NULL;
    memset(ta, 0, sizeof *ta);
    ta->argc = argc;
    ta->argv = argv;
    ta->log_every = 1;
    ta->epochs = 1;
    ta->max_skipped = DEFAULT_MAX_SKIPPED;
    ta->warmup = -1;
    ta->loader_threads = 1;
    ta->prefetch = 4;
    while (a.i < argc) {
        const char *arg = argv[a.i];
        const char *val = NULL;
        int r;
        if (!a.no_more_flags && strcmp(arg, "--") == 0) {
            a.no_more_flags = true;
            a.i++;
        } else if (!cli_is_flag(&a)) {
            if (ta->file) {
                return cli_usage_error("train", "one model file at a time ('%s' and '%s')",
                                       ta->file, arg);
            }
            ta->file = arg;
            a.i++;
        } else if ((r = cli_take_flag(&a, "-D", NULL, true, &val)) != 0) {
            bind b;
            int e;
            if (r < 0) {
                return EXIT_USAGE;
            }
            if ((e = parse_define("train", val, &b)) != EXIT_OK) {
                return e;
            }
            if (!DL_VEC_PUSH(binds, b)) {
                return EXIT_INTERNAL;
            }
        } else if ((r = cli_take_flag(&a, NULL, "--data", true, &val)) != 0) {
            int e = r < 0 ? EXIT_USAGE : take_named_path("--data", val, ta->data, &ta->n_data);
            if (e != EXIT_OK) {
                return e;
            }
        } else if ((r = cli_take_flag(&a, NULL, "--test-data", true, &val)) != 0) {
            int e = r < 0 ? EXIT_USAGE
                          : take_named_path("--test-data", val, ta->test_data, &ta->n_test_data);
            if (e != EXIT_OK) {
                return e;
            }
        } else if ((r = cli_take_flag(&a, NULL, "--normalize", true, &val)) != 0) {
            int e = r < 0 ? EXIT_USAGE : take_normalize(val, ta);
            if (e != EXIT_OK) {
                return e;
            }
        } else if ((r = cli_take_flag(&a, NULL, "--dataset", true, &ta->dataset)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--test", true, &ta->test)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--epochs", true, &epochs)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--batch", true, &batch)) != 0 ||
                   (r = cli_take_name_flag(&a, "--save", "a file name", &ta->save)) != 0 ||
                   (r = cli_take_name_flag(&a, "--init", "a file name", &ta->init)) != 0 ||
                   (r = cli_take_name_flag(&a, "--resume", "a file name", &ta->resume)) != 0 ||
                   (r = cli_take_name_flag(&a, "--map", "a file name", &ta->map)) != 0 ||
                   (r = cli_take_name_flag(&a, "--log", "a file name", &ta->log)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--log-every", true, &log_every)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--save-every", true, &save_every)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--lr", true, &lr)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--lr-schedule", true, &sched)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--warmup-steps", true, &warmup)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--seed", true, &seed)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--limit-train", true, &limit)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--loader-threads", true, &producers)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--prefetch", true, &prefetch)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--max-skipped-steps", true, &max_skipped)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--comm", true, &ta->comm)) != 0 ||
                   (r = cli_take_flag(&a, NULL, "--deterministic", true, &det)) != 0 ||
                   (r = take_cache_flag(&a, copts)) != 0 ||
                   (r = take_exec_flag(&a, &ta->exec)) != 0) {
            if (r < 0) {
                return EXIT_USAGE;
            }
        } else if (cli_take_flag(&a, "-v", "--verbose", false, NULL) == 1) {
            ta->verbose = true;
        } else if (cli_take_flag(&a, NULL, "--dry-run", false, NULL) == 1) {
            ta->dry_run = true;
        } else if (cli_take_flag(&a, NULL, "--detect-anomaly", false, NULL) == 1) {
            ta->detect_anomaly = true;
        } else if (cli_take_flag(&a, NULL, "--sync-bn", false, NULL) == 1) {
            copts->sync_bn = true;
        } else {
            return cli_usage_error("train", "unknown flag '%s'", arg);
        }
    }
    if (!ta->file) {
        return cli_usage_error("train", "no model file");
    }
    if (!ta->dataset && !ta->n_data) {
        return cli_usage_error("train", "no data set (give one with --dataset fashion-mnist, "
                                        "idx:IMAGES,LABELS or npy:X.npy,Y.npy, or each input's "
                                        "file with --data NAME=FILE.npy)");
    }
    if (ta->dataset && ta->n_data) {
        return cli_usage_error("train", "--dataset and --data exclude each other (--data NAME=FILE "
                                        "binds every input by name; --dataset is for the "
                                        "classifier's data and labels)");
    }
    if (ta->n_test_data && !ta->n_data) {
        return cli_usage_error("train", "--test-data goes with --data (with --dataset: --test)");
    }
    if (ta->test && ta->n_data) {
        return cli_usage_error("train", "--test goes with --dataset (with --data: --test-data "
                                        "NAME=FILE for each input)");
    }
    if (ta->norm_none && ta->n_norms) {
        return cli_usage_error("train", "--normalize none and --normalize %s exclude each other",
                               ta->norms[0].name);
    }
    if (epochs && !cli_parse_long(epochs, 1, 1000000, &ta->epochs)) {
        return cli_usage_error("train", "--epochs expects an integer 1..1000000, got '%s'", epochs);
    }
    if (batch && !cli_parse_long(batch, 1, 1L << 30, &ta->batch)) {
        return cli_usage_error("train", "--batch expects an integer >= 1, got '%s'", batch);
    }
    if (limit && !cli_parse_long(limit, 1, LONG_MAX, &ta->limit)) {
        return cli_usage_error("train", "--limit-train expects an integer >= 1, got '%s'", limit);
    }
    if (producers &&
        !cli_parse_long(producers, 1, DLRT_LOADER_MAX_PRODUCERS, &ta->loader_threads)) {
        return cli_usage_error("train", "--loader-threads expects an integer 1..%d, got '%s'",
                               DLRT_LOADER_MAX_PRODUCERS, producers);
    }
    // Two slots at least: the step holds one while a producer fills the next.
    if (prefetch && !cli_parse_long(prefetch, 2, DLRT_LOADER_MAX_SLOTS, &ta->prefetch)) {
        return cli_usage_error("train", "--prefetch expects an integer 2..%d, got '%s'",
                               DLRT_LOADER_MAX_SLOTS, prefetch);
    }
    if (max_skipped && !cli_parse_long(max_skipped, 0, LONG_MAX, &ta->max_skipped)) {
        return cli_usage_error("train", "--max-skipped-steps expects an integer >= 0, got '%s'",
                               max_skipped);
    }
    if (warmup && !cli_parse_long(warmup, 0, LONG_MAX, &ta->warmup)) {
        return cli_usage_error("train", "--warmup-steps expects an integer >= 0, got '%s'", warmup);
    }
    if (lr) {
        char *end = NULL;
        errno = 0;
        ta->lr = strtod(lr, &end);
        if (!*lr || *end || errno == ERANGE || !isfinite(ta->lr) || ta->lr < 0) {
            return cli_usage_error("train", "--lr expects a finite number >= 0, got '%s'", lr);
        }
        ta->has_lr = true;
    }
    if (log_every && !cli_parse_long(log_every, 1, LONG_MAX, &ta->log_every)) {
        return cli_usage_error("train", "--log-every expects an integer >= 1 (steps), got '%s'",
                               log_every);
    }
    if (ta->log) {
        size_t n = strlen(ta->log);
        bool ok = (n > 6 && !strcmp(ta->log + n - 6, ".jsonl")) ||
                  (n > 4 && !strcmp(ta->log + n - 4, ".csv"));
        if (!ok) {
            return cli_usage_error("train",
                                   "--log %s: the format comes from the suffix: .jsonl (JSON "
                                   "Lines) or .csv",
                                   ta->log);
        }
    }
    if (log_every && !ta->log) {
        return cli_usage_error("train", "--log-every only applies with --log FILE");
    }
    if (save_every && !train_parse_every(save_every, &ta->save_every, &ta->save_every_s)) {
        return cli_usage_error("train",
                               "--save-every expects N (steps) or a time: Ns, Nm or Nh (N >= 1), "
                               "got '%s'",
                               save_every);
    }
    if (save_every && !ta->save) {
        return cli_usage_error("train", "--save-every needs --save CKPT (the file it rewrites)");
    }
    if (ta->resume && ta->init) {
        return cli_usage_error("train",
                               "--resume and --init exclude each other (--resume restores the "
                               "params too, and the step, the data position and the schedule)");
    }
    if (ta->map && !ta->init) {
        return cli_usage_error("train", "--map renames the tensors of --init's checkpoint%s",
                               ta->resume ? " (--resume reads a checkpoint of dlcc train, whose "
                                            "names are the model's)"
                                          : "; give --init CKPT");
    }
    if (seed) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(seed, &end, 10);
        if (!*seed || *end || errno == ERANGE || seed[0] == '-') {
            return cli_usage_error("train", "--seed expects an integer 0..2^64-1, got '%s'", seed);
        }
        ta->seed = (uint64_t)v;
        ta->has_seed = true;
    }
    ta->sched = DLRT_LR_CONSTANT;
    if (sched && dlrt_lr_schedule_parse(sched, &ta->sched) != DLRT_OK) {
        return cli_usage_error("train",
                               "--lr-schedule: unknown schedule '%s' (constant, step, cosine, "
                               "warmup-cosine, one-cycle)",
                               sched);
    }
    if (ta->comm && strcmp(ta->comm, "auto") != 0 && strcmp(ta->comm, "mpi") != 0 &&
        strcmp(ta->comm, "none") != 0) {
        return cli_usage_error("train", "--comm expects auto, mpi or none, got '%s'", ta->comm);
    }
    if (warmup && ta->sched != DLRT_LR_WARMUP_COSINE) {
        return cli_usage_error("train",
                               "--warmup-steps only applies to --lr-schedule warmup-cosine");
    }
    if (det && !cli_parse_long(det, 1, DLRT_MAX_CHUNKS, &ta->chunks)) {
        return cli_usage_error("train", "--deterministic expects a number of ranks 1..%d, got '%s'",
                               DLRT_MAX_CHUNKS, det);
    }
    // One process matching N ranks: --batch is the global batch, N chunks of the ranks' batch.
    if (ta->chunks > 1 && !train_wants_mpi(ta->comm)) {
        if (ta->batch == 0 || ta->batch % ta->chunks != 0) {
            return cli_usage_error("train",
                                   "--deterministic %ld in one process needs --batch, the global "
                                   "batch: a multiple of %ld (each chunk is a rank's batch)",
                                   ta->chunks, ta->chunks);
        }
        if (ta->detect_anomaly) {
            return cli_usage_error("train", "--detect-anomaly does not replay the chunks of "
                                            "--deterministic");
        }
        ta->batch /= ta->chunks; // what is compiled: one chunk
    }
    return EXIT_OK;
}

// Refuses a --save target whose directory cannot be written, before hours of training.
static bool save_dir_writable(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        return access(".", W_OK) == 0;
    }
    if (slash == path) {
        return access("/", W_OK) == 0;
    }
    char dir[4096];
    size_t n = (size_t)(slash - path);
    if (n >= sizeof dir) {
        return true; // let the save itself report it
    }
    memcpy(dir, path, n);
    dir[n] = 0;
    return access(dir, W_OK) == 0;
}

// What train_event needs: the run's arguments and model, and what it keeps between events.
typedef struct train_progress {
    const train_args *ta;
    const train_model *tm;
    const dl_ir_module *m;
    dlrt_session *s;
    anomaly_ctx *an;
    dl_diags *d;
    bool tty;               // stderr is a terminal: one progress line rewritten in place
    double last_print;      // epoch seconds of the last progress line (-1: none yet)
    dlrt_nonfinite_guard g; // the guard at the last non-finite step
    char desc[160];         // "step T (epoch E, batch K of N)" of the last non-finite step
    int64_t stop_step;      // the step (1-based) at which the guard stopped the run
    dlrt_status rs;         // why train_event stopped the run
    bool quiet;             // a data-parallel rank other than 0: no progress, epoch lines, warnings
    int world;              // data-parallel ranks (1 without): samples/s count every rank's
    train_log *log;         // --log (NULL: none)
    int64_t log_step;       // steps done at the last log record (or the start)
    double log_s;           // run seconds at the last log record
    train_position pos;     // the run's constants (batch, seed, ...) for the checkpoints
    double last_save_s;     // run seconds at the last --save-every checkpoint
    bool signals;           // SIGINT / SIGTERM stop the run (not under MPI)
    int interrupted;        // the signal that stopped the run (0: none)
    train_position stop;    // where it stopped (after an interrupt)
    train_position last;    // the position after the last step or epoch event
    int64_t epoch, k0;      // the epoch under way and its first batch in this process (a
                            // resumed run starts inside one): the rates count the steps run
    const dlrt_loader *ld;  // the training loader (--data: the batch's arrays)
    const dlrt_meta_pair *norm_meta; // the normalisations' "dlcc.normalize.*" pairs
    size_t n_norm_meta;
    bool dp_accum;     // data-parallel (ranks or chunks) with accumulate > 1: every rank (chunk)
                       // has its own accumulators and a checkpoint holds rank 0's only, so
                       // --save-every and Ctrl-C wait for the end of the cycle
    bool save_pending; // a --save-every checkpoint due mid-cycle, written at the boundary
} train_progress;

// Writes a checkpoint of the run as it is after `step` steps: the session (params, optimizer
// and step state) and the loop's position (dlcc.train.* metadata), atomically.
static dlrt_status train_save(const train_progress *p, const char *path, const train_position *at) {
    char buf[TRAIN_POSITION_KEYS][64];
    dlrt_meta_pair pairs[TRAIN_POSITION_KEYS + TRAIN_MAX_NAMED];
    train_position_meta(at, buf, pairs);
    for (size_t i = 0; i < p->n_norm_meta; i++) {
        pairs[TRAIN_POSITION_KEYS + i] = p->norm_meta[i];
    }
    return dlrt_session_save_meta(p->s, path, pairs, TRAIN_POSITION_KEYS + p->n_norm_meta);
}

// After `step` steps (the epoch's sums so far: loss_sum, skipped): stops the run at a pending
// signal (the checkpoint is written after the loop), or writes the --save-every checkpoint when
// one is due; in a data-parallel run with accumulation both wait for the cycle's boundary.
// Returns non-zero to stop the run.
static int train_between_steps(train_progress *p, const dlrt_train_event *ev, int64_t step,
                               double loss_sum, int64_t skipped) {
    train_position at = p->pos;
    at.step = step;
    at.loss_sum = loss_sum;
    at.skipped = skipped;
    at.guard = *ev->guard;
    at.time_s = p->pos.time_s + ev->run_s;
    p->last = at;
    double count = 0;
    if (p->dp_accum && dlrt_session_get_hparam(p->s, "accum_count", &count) == DLRT_OK &&
        count != 0) { // mid-cycle: the other ranks' accumulators are in no checkpoint
        p->save_pending |= p->ta->save_every > 0 && step % p->ta->save_every == 0;
        return 0;
    }
    int sig = p->signals ? train_signal_pending() : 0;
    if (sig) {
        p->interrupted = sig;
        p->stop = at;
        return 1;
    }
    const train_args *ta = p->ta;
    bool due = (ta->save_every > 0 && step % ta->save_every == 0) || p->save_pending ||
               (ta->save_every_s > 0 && ev->run_s - p->last_save_s >= ta->save_every_s);
    if (!due || p->quiet || step == ev->total_steps) { // the last one: after the test
        return 0;
    }
    if ((p->rs = train_save(p, ta->save, &at)) != DLRT_OK) {
        return 1;
    }
    p->last_save_s = ev->run_s;
    p->save_pending = false;
    if (ta->verbose) {
        fprintf(stderr, "%sdlcc: step %lld: wrote %s\n", p->tty ? "\r\033[K" : "", (long long)step,
                ta->save);
    }
    return 0;
}

// The --log record of the step an event reports.
static void train_log_step(train_progress *p, const dlrt_train_event *ev) {
    if (!p->log || p->quiet || (ev->step + 1) % p->ta->log_every != 0) {
        return;
    }
    train_log_rec r;
    memset(&r, 0, sizeof r);
    r.step = ev->step + 1;
    r.epoch = ev->epoch + 1;
    r.loss = ev->info.loss;
    r.lr = ev->lr;
    r.grad_norm = ev->info.grad_norm;
    r.skipped = ev->info.skipped != 0;
    double dt = ev->run_s - p->log_s;
    r.samples_per_s =
        dt > 0 ? (double)(r.step - p->log_step) * (double)ev->batch_size * (double)p->world / dt
               : NAN;
    r.time_s = p->pos.time_s + ev->run_s;
    r.eval_loss = r.eval_acc = NAN;
    train_log_write(p->log, &r);
    p->log_step = r.step;
    p->log_s = ev->run_s;
}

// A non-finite step (ev->nonfinite): names it, and at the first one warns and, with
// --detect-anomaly, replays it in the reference evaluator on the batch (still held). Returns
// non-zero (after setting p->rs) when the run must stop.
static int train_nonfinite(train_progress *p, const dlrt_train_event *ev) {
    const dlrt_loader_batch *bt = ev->data;
    p->g = *ev->guard;
    snprintf(p->desc, sizeof p->desc, "step %lld (epoch %lld, batch %lld of %lld)",
             (long long)ev->step + 1, (long long)ev->epoch + 1, (long long)ev->batch + 1,
             (long long)ev->steps_per_epoch);
    if (p->tty) {
        fprintf(stderr, "\r\033[K");
    }
    if (!ev->guard->first || p->quiet) {
        return 0;
    }
    guard_warn("train", p->desc, &ev->info, ev->guard);
    if (!p->ta->detect_anomaly) {
        return 0;
    }
    bool y32 = p->tm->y && p->tm->y->type.dtype == DL_DT_INT32;
    dl_tensor ins[TRAIN_MAX_NAMED];
    for (size_t j = 0; j < p->m->inputs.len && j < TRAIN_MAX_NAMED; j++) {
        const dl_ir_value *v = p->m->inputs.data[j];
        memset(&ins[j], 0, sizeof ins[j]);
        ins[j].dtype = v->type.dtype;
        ins[j].rank = v->type.rank;
        for (int32_t q = 0; q < v->type.rank; q++) {
            ins[j].dims[q] = v->type.dims[q].value;
        }
        ins[j].data = v == p->tm->x ? (void *)(uintptr_t)bt->x
                      : y32         ? (void *)(uintptr_t)bt->y_i32
                                    : (void *)(uintptr_t)bt->y;
        const void *arr = NULL;
        if (p->tm->named && dlrt_loader_batch_array(p->ld, bt, j, &arr, NULL) == DLRT_OK) {
            ins[j].data = (void *)(uintptr_t)arr; // --data: array j feeds input j
        }
    }
    p->an->calls--; // the replayed call's Dropout counter
    anomaly_report(p->an, ins, ev->loss_scale_used, p->desc, p->d);
    p->an->calls++;
    if (!cli_flush_diags(p->d)) {
        p->rs = DLRT_ERR_NOMEM;
        return 1;
    }
    return 0;
}

// The progress line (stderr): rewritten in place at most every 0.2 s on a terminal, else once
// per epoch.
static void train_progress_line(train_progress *p, const dlrt_train_event *ev) {
    bool last = ev->batch + 1 == ev->steps_per_epoch;
    if (!((p->tty && (ev->epoch_s - p->last_print >= 0.2 || last)) || (!p->tty && last))) {
        return;
    }
    double el = ev->epoch_s, done = (double)(ev->batch + 1), ran = (double)(ev->batch + 1 - p->k0);
    double rate = el > 0 ? ran * (double)ev->batch_size * p->world / el : 0;
    double per_step = ev->run_s / (double)(ev->step + 1 - p->ta->start_step);
    char eta[32], lb[32];
    format_eta(per_step * (double)(ev->total_steps - ev->step - 1), eta, sizeof eta);
    fprintf(stderr, "%sepoch %lld/%ld  step %lld/%lld  loss %s  %.0f samples/s  ETA %s%s",
            p->tty ? "\r\033[K" : "", (long long)ev->epoch + 1, p->ta->epochs,
            (long long)ev->batch + 1, (long long)ev->steps_per_epoch,
            num_prec(ev->loss_sum / done, 4, lb, sizeof lb), rate, eta, p->tty ? "" : "\n");
    fflush(stderr);
    p->last_print = ev->epoch_s;
}

// The runtime loop's callback (dlrt_train_run): everything `dlcc train` shows while training.
static int train_event(void *user, const dlrt_train_event *ev) {
    train_progress *p = user;
    switch (ev->kind) {
    case DLRT_TRAIN_EVENT_BATCH:
        if (ev->batch == 0 || ev->epoch != p->epoch) {
            p->last_print = -1;
            p->epoch = ev->epoch;
            p->k0 = ev->batch;
        }
        if (p->ta->detect_anomaly && (p->rs = anomaly_snapshot(p->an, p->s)) != DLRT_OK) {
            return 1;
        }
        return 0;
    case DLRT_TRAIN_EVENT_STEP:
        p->an->calls++;
        if (ev->nonfinite && train_nonfinite(p, ev) != 0) {
            return 1;
        }
        train_log_step(p, ev);
        if (ev->nonfinite && ev->guard->stop) {
            p->stop_step = ev->step + 1; // dlrt_train_run stops: the message comes after it
            return 0;
        }
        if (!p->quiet) {
            train_progress_line(p, ev);
        }
        if (ev->batch + 1 < ev->steps_per_epoch) { // at an epoch's end: after its line
            return train_between_steps(p, ev, ev->step + 1, ev->loss_sum, ev->skipped);
        }
        return 0;
    case DLRT_TRAIN_EVENT_EPOCH: {
        train_log_flush(p->log);
        if (p->quiet) {
            return train_between_steps(p, ev, ev->step, 0, 0);
        }
        if (p->tty) {
            fprintf(stderr, "\r\033[K");
            fflush(stderr);
        }
        double el = ev->epoch_s, spe = (double)ev->steps_per_epoch;
        double ran = spe - (double)(ev->epoch == p->epoch ? p->k0 : 0);
        char lb[32];
        printf("epoch %lld: mean loss %s, %.2f s, %.0f samples/s, skipped %lld, data wait %.3f "
               "ms/batch\n",
               (long long)ev->epoch + 1, num_prec(ev->loss_sum / spe, 6, lb, sizeof lb), el,
               el > 0 ? ran * (double)ev->batch_size * p->world / el : 0.0, (long long)ev->skipped,
               ev->wait_ms / ran);
        fflush(stdout);
        return train_between_steps(p, ev, ev->step, 0, 0);
    }
    }
    return 0;
}

// Prints `s` for a POSIX shell: as it is when it holds only safe characters, else in single
// quotes (a quote inside becomes '\'').
static void print_shell_word(FILE *f, const char *s) {
    bool plain = *s != 0;
    for (const char *c = s; *c && plain; c++) {
        plain = isalnum((unsigned char)*c) || strchr("_./=:,+-@%", *c);
    }
    if (plain) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (const char *c = s; *c; c++) {
        if (*c == '\'') {
            fputs("'\\''", f);
        } else {
            fputc(*c, f);
        }
    }
    fputc('\'', f);
}

// "dlcc train: interrupted at step S (epoch E); resume with: dlcc train ARGS --resume CKPT",
// ARGS being this run's own without its --init / --resume.
static void train_interrupted_msg(const train_args *ta, const train_position *at,
                                  const char *ckpt) {
    int64_t epoch = at->step > 0 ? (at->step - 1) / at->steps_per_epoch + 1 : 1;
    fflush(stdout);
    fprintf(stderr, "dlcc train: interrupted at step %lld (epoch %lld); resume with: dlcc train",
            (long long)at->step, (long long)epoch);
    bool flags = true;
    for (int i = 0; i < ta->argc; i++) {
        const char *a = ta->argv[i];
        if (flags && strcmp(a, "--") == 0) {
            flags = false;
        } else if (flags && (!strcmp(a, "--init") || !strcmp(a, "--resume"))) {
            i++; // and its value
            continue;
        } else if (flags && (!strncmp(a, "--init=", 7) || !strncmp(a, "--resume=", 9))) {
            continue;
        }
        fputc(' ', stderr);
        print_shell_word(stderr, a);
    }
    fputs(" --resume ", stderr);
    print_shell_word(stderr, ckpt);
    fputc('\n', stderr);
}

static int cmd_train(int argc, char **argv) {
    train_args ta;
    train_specs *sp = dl_mem_calloc(1, sizeof *sp);
    bind_vec binds = {0};
    dlcc_options copts;
    dlcc_options_init(&copts);
    dlcc_bind *cbinds = NULL;
    dl_diags *d = NULL;
    dl_ir_module *m = NULL;
    dl_idx_mnist_paths mp;
    memset(&mp, 0, sizeof mp);
    train_model tm;
    uint8_t *art = NULL;
    dlrt_model *rtm = NULL;
    dlrt_session *s = NULL;
    dlrt_loader *ld = NULL, *test_ld = NULL;
    anomaly_ctx an;
    memset(&an, 0, sizeof an);
    train_dp dp = {NULL, 0, 1};
    train_log *tlog = NULL;
    bool log_started = false, tp_signals_installed = false;
    train_position rp; // --resume's position (zero for a fresh run)
    memset(&rp, 0, sizeof rp);
    train_norms *ns = dl_mem_calloc(1, sizeof *ns);
    load_map lmap = {0};
    dlrt_meta_pair norm_meta[TRAIN_MAX_NAMED];
    char *norm_keys[TRAIN_MAX_NAMED], *norm_vals[TRAIN_MAX_NAMED];
    size_t n_norm_meta = 0;
    char intr_path[4096];
    int rc = EXIT_OK;
    memset(&ta, 0, sizeof ta);
    if (!sp || !ns) {
        rc = EXIT_INTERNAL;
        goto out;
    }

    // 1. Arguments.
    if ((rc = train_parse_args(argc, argv, &ta, &copts, &binds)) != EXIT_OK ||
        (ta.dataset && (rc = train_specs_parse(&ta, sp)) != EXIT_OK)) {
        goto out;
    }
    if (dl_diags_create(&d) != DL_OK) {
        rc = EXIT_INTERNAL;
        goto out;
    }

    // The rename rules of --init's checkpoint, checked before anything is compiled.
    if (ta.map && load_map_read(ta.map, d, &lmap) != DL_OK) {
        rc = dl_diags_oom(d) ? EXIT_INTERNAL : EXIT_INPUT;
        goto out;
    }

    // 2. The model: its interface decides the batch dim; --batch binds it like -D.
    dl_status st = load_model(ta.file, binds.data, binds.len, d, &m);
    if (st != DL_OK) {
        rc = cli_status_exit(st);
        goto out;
    }
    if (ta.n_data ? !train_model_inspect_named(m, &ta, d, &tm)
                  : !train_model_inspect(m, ta.file, d, &tm)) {
        rc = EXIT_INPUT;
        goto out;
    }
    if (ta.batch > 0 && ta.batch != tm.batch) {
        const char *bname = m->dims.data[tm.batch_sym].name;
        for (size_t i = 0; i < binds.len; i++) {
            if (strcmp(binds.data[i].name, bname) == 0) {
                rc = cli_usage_error("train",
                                     "--batch %ld and -D %s=%lld disagree (%s is the batch dim)",
                                     ta.batch, bname, (long long)binds.data[i].value, bname);
                goto out;
            }
        }
        bind b;
        memset(&b, 0, sizeof b);
        snprintf(b.name, sizeof b.name, "%s", bname);
        b.value = ta.batch;
        if (!DL_VEC_PUSH(&binds, b)) {
            rc = EXIT_INTERNAL;
            goto out;
        }
        dl_ir_module_destroy(m);
        m = NULL;
        if ((st = load_model(ta.file, binds.data, binds.len, d, &m)) != DL_OK) {
            rc = cli_status_exit(st);
            goto out;
        }
        if (ta.n_data ? !train_model_inspect_named(m, &ta, d, &tm)
                      : !train_model_inspect(m, ta.file, d, &tm)) {
            rc = EXIT_INPUT;
            goto out;
        }
    }
    if (ta.save && !save_dir_writable(ta.save)) {
        file_diag(d, ta.save, "cannot write the checkpoint there: %s", strerror(errno));
        rc = EXIT_INPUT;
        goto out;
    }
    // Where Ctrl-C writes its checkpoint: --save, else MODEL.interrupted.safetensors beside the
    // model (in the current directory when the model's is not writable).
    if (ta.save) {
        snprintf(intr_path, sizeof intr_path, "%s", ta.save);
    } else {
        size_t n = strlen(ta.file);
        n -= n > 4 && strcmp(ta.file + n - 4, ".dlg") == 0 ? 4 : 0;
        snprintf(intr_path, sizeof intr_path, "%.*s.interrupted.safetensors", (int)n, ta.file);
        if (!save_dir_writable(intr_path)) {
            const char *bn = strrchr(intr_path, '/');
            memmove(intr_path, bn + 1, strlen(bn + 1) + 1);
        }
    }

    // --resume: the loop's position, checked against this run before any data is read.
    if (ta.resume) {
        char err[1200], mname[256];
        const char *bname = m->dims.data[tm.batch_sym].name;
        if (!train_position_read(ta.resume, &rp, mname, sizeof mname, err, sizeof err)) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s", err);
            rc = EXIT_INPUT;
            goto out;
        }
        if (strcmp(mname, m->name) != 0) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                    "--resume %s: a checkpoint of model '%s', not of '%s' (%s)", ta.resume, mname,
                    m->name, ta.file);
            rc = EXIT_INPUT;
            goto out;
        }
        if (rp.batch != tm.batch) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                    "--resume %s: the run had batch %lld, this one has %s = %lld (resume with "
                    "--batch %lld)",
                    ta.resume, (long long)rp.batch, bname, (long long)tm.batch,
                    (long long)rp.batch);
            rc = EXIT_INPUT;
            goto out;
        }
        if (ta.has_seed && ta.seed != rp.seed) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                    "--resume %s: the run was shuffled with --seed %llu, not %llu (leave --seed "
                    "out: the checkpoint's is used)",
                    ta.resume, (unsigned long long)rp.seed, (unsigned long long)ta.seed);
            rc = EXIT_INPUT;
            goto out;
        }
        if (rp.step > rp.steps_per_epoch * (int64_t)ta.epochs) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                    "--resume %s: the checkpoint is at step %lld, past the %lld steps of --epochs "
                    "%ld (%lld steps per epoch)",
                    ta.resume, (long long)rp.step, (long long)(rp.steps_per_epoch * ta.epochs),
                    ta.epochs, (long long)rp.steps_per_epoch);
            rc = EXIT_INPUT;
            goto out;
        }
        ta.seed = rp.seed;
        ta.start_step = rp.step;
    }

    // Data parallelism (under mpirun): every rank trains on its shard of each epoch with
    // batch B, the train step all-reduces the gradients (a global batch of world x B); rank 0
    // alone prints, tests and writes the checkpoint.
    dlrt_status rs = DLRT_OK;
    if (train_wants_mpi(ta.comm)) {
        if ((rs = dlrt_comm_open_mpi(NULL, NULL, &dp.comm)) != DLRT_OK) {
            rc = rt_fail(d, "--comm mpi", rs);
            goto out;
        }
        dp.rank = dlrt_comm_rank(dp.comm);
        dp.world = dlrt_comm_size(dp.comm);
        if (ta.chunks > 0 && ta.chunks != dp.world) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                    "--deterministic %ld: this run has %d data-parallel ranks (under mpirun, "
                    "--deterministic names the ranks it runs as)",
                    ta.chunks, dp.world);
            rc = EXIT_USAGE;
            goto out;
        }
        if (dp.rank != 0) {
            ta.verbose = false;
            ta.exec.profile = NULL;
            ta.exec.summary = false;
        }
    }
    if (ta.resume && rp.world != dp.world) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                "--resume %s: the run had %lld data-parallel rank%s, this one has %d (each rank's "
                "share of the data depends on it)",
                ta.resume, (long long)rp.world, rp.world == 1 ? "" : "s", dp.world);
        rc = EXIT_INPUT;
        goto out;
    }
    // --log: opened (and so checked) before the data is read; a resumed run appends to it.
    if (ta.log && dp.rank == 0) {
        char err[1200];
        if (!train_log_open(ta.log, ta.resume != NULL, &tlog, err, sizeof err)) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s", err);
            rc = EXIT_INPUT;
            goto out;
        }
    }

    // 3. The data: the loaders read and check the files and normalise the samples as the
    // normalisation plan says (--normalize, the checkpoint's, --dataset's default).
    if ((rc = train_norms_plan(&ta, m, &tm, ns, d)) != EXIT_OK) {
        goto out;
    }
    rc = ta.n_data ? train_loaders_named(&ta, &dp, m, &tm, ns, d, &ld, &test_ld)
                   : train_loaders(sp, &ta, &dp, &mp, m, &tm, ns, d, &ld, &test_ld);
    if (rc != EXIT_OK) {
        goto out;
    }
    dlrt_loader_info li;
    dlrt_loader_info_get(ld, &li);
    if (dp.rank == 0) {
        train_norms_print(ns, li.n_samples, "train");
    }
    for (size_t i = 0; i < ns->n; i++) { // stored with every checkpoint of the run
        dl_strbuf kb = {0};
        dl_strbuf_printf(&kb, "dlcc.normalize.%s", ns->v[i].input);
        norm_keys[i] = dl_strbuf_take(&kb);
        norm_vals[i] = train_norm_format(&ns->v[i]);
        n_norm_meta++;
        if (!norm_keys[i] || !norm_vals[i]) {
            rc = EXIT_INTERNAL;
            goto out;
        }
        norm_meta[i].key = norm_keys[i];
        norm_meta[i].value = norm_vals[i];
    }
    int64_t B = tm.batch, spe = li.batches_per_epoch;
    int64_t chunks = !dp.comm && ta.chunks > 1 ? ta.chunks : 1; // --deterministic in one process
    if (ta.resume && (rp.steps_per_epoch != spe || rp.epoch_samples != li.epoch_samples)) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                "--resume %s: the run had %lld samples per epoch (%lld steps), this data gives "
                "%lld (%lld steps): resume with the same --dataset and --limit-train",
                ta.resume, (long long)rp.epoch_samples, (long long)rp.steps_per_epoch,
                (long long)li.epoch_samples, (long long)spe);
        rc = EXIT_INPUT;
        goto out;
    }
    // The steps and warm-up steps of the run, as the runtime's loop will count them.
    dlrt_train_options to;
    dlrt_train_options_init(&to);
    to.epochs = ta.epochs;
    to.schedule = ta.sched;
    to.warmup = ta.warmup;
    int64_t T = 0, W = 0;
    if (dlrt_train_plan(&to, spe, &T, &W) != DLRT_OK) { // spe, epochs >= 1: the warm-up
        rc =
            cli_usage_error("train", "--warmup-steps %lld must be below the %lld steps of training",
                            (long long)W, (long long)T);
        goto out;
    }
    double base_lr = ta.has_lr ? ta.lr : dl_ir_train_opt_value(m->train, "lr");
    if (ta.verbose || ta.dry_run) {
        FILE *f = ta.dry_run ? stdout : stderr;
        fprintf(f, "dlcc: data: %lld training samples of [%lld values]", (long long)li.n_samples,
                (long long)li.sample_numel);
        if (test_ld) {
            dlrt_loader_info ti;
            dlrt_loader_info_get(test_ld, &ti);
            fprintf(f, ", %lld test samples", (long long)ti.n_samples);
        }
        if (tm.named) {
            for (size_t i = 0; i < dlrt_loader_num_arrays(ld); i++) {
                dlrt_loader_array_info ai;
                char shp[200];
                if (dlrt_loader_array_info_get(ld, i, &ai) == DLRT_OK) {
                    dl_shape_format(ai.sample_dims, ai.sample_rank, shp, sizeof shp);
                    fprintf(f, "%s %s=%s %s", i ? "," : ";", ai.name, ai.path, shp);
                }
            }
            fputs("\n", f);
        } else {
            fputs("; normalised with mean ", f);
            print_channels(f, li.mean, li.n_channels);
            fputs(" std ", f);
            print_channels(f, li.std, li.n_channels);
            fputs("\n", f);
        }
        fprintf(f,
                "dlcc: model %s: batch dim %s = %lld, %lld steps per epoch (%lld samples "
                "dropped), %lld steps, lr %.6g (%s schedule",
                m->name, m->dims.data[tm.batch_sym].name, (long long)B, (long long)spe,
                (long long)(li.epoch_samples - spe * B * chunks), (long long)T, base_lr,
                dlrt_lr_schedule_name(ta.sched));
        if (ta.sched == DLRT_LR_WARMUP_COSINE) {
            fprintf(f, ", %lld warm-up steps", (long long)W);
        }
        fprintf(f, "), seed %llu\n", (unsigned long long)ta.seed);
        fprintf(f, "dlcc: data loader: %ld producer thread%s, %ld batch slots\n", ta.loader_threads,
                ta.loader_threads == 1 ? "" : "s", ta.prefetch);
        if (dp.comm) {
            fprintf(f,
                    "dlcc: data-parallel: %d ranks (MPI), a shard of %lld samples and batch %lld "
                    "each, global batch %lld\n",
                    dp.world, (long long)li.epoch_samples, (long long)B, (long long)B * dp.world);
            if (copts.sync_bn || (m->train && m->train->sync_bn)) {
                size_t n_bn = 0;
                for (size_t i = 0; i < m->nodes.len; i++) {
                    n_bn += m->nodes.data[i]->op == DL_IR_OP_BATCH_NORMALIZATION;
                }
                fprintf(f,
                        "dlcc: data-parallel: BatchNorm statistics of the global batch "
                        "(sync_batchnorm: %zu BatchNormalization%s, 4 all-reduces each per "
                        "step)\n",
                        n_bn, n_bn == 1 ? "" : "s");
            }
        }
        if (chunks > 1) {
            fprintf(f,
                    "dlcc: deterministic: %lld chunks of batch %lld per step (global batch %lld), "
                    "the bits of %lld data-parallel ranks\n",
                    (long long)chunks, (long long)B, (long long)B * chunks, (long long)chunks);
        }
    }
    if (ta.dry_run && dp.rank != 0) {
        goto out;
    }
    if (ta.dry_run) {
        // The plan without compiling or training: every step's lr and the first samples of each
        // epoch's order, as the loader will hand them out (what the tests check).
        for (long e = 0; e < ta.epochs; e++) {
            printf("epoch %ld order:", e + 1);
            for (int64_t i = 0; i < li.epoch_samples && i < 8; i++) {
                int64_t idx = 0;
                if ((rs = dlrt_loader_sample_index(ld, e, i, &idx)) != DLRT_OK) {
                    rc = rt_fail(d, ta.file, rs);
                    goto out;
                }
                printf(" %lld", (long long)idx);
            }
            printf("\n");
        }
        for (int64_t t = 0; t < T; t++) {
            printf("step %lld lr %.9g\n", (long long)t + 1,
                   dlrt_lr_schedule_at(ta.sched, base_lr, t, T, W));
        }
        goto out;
    }

    // 4. Compile (through the cache) and set up the session.
    dlcc_result res;
    if (!options_set_binds(&copts, binds.data, binds.len, &cbinds)) {
        rc = EXIT_INTERNAL;
        goto out;
    }
    st = dlcc_compile_file(ta.file, &copts, d, &res);
    if (ta.verbose && st == DL_OK) {
        print_cache_line(&res);
    }
    if (!cli_flush_diags(d)) {
        rc = EXIT_INTERNAL;
        goto out;
    }
    if (st != DL_OK) {
        rc = cli_status_exit(st);
        goto out;
    }
    art = res.artifact;
    rs = dlrt_model_load_memory(art, res.artifact_len, &rtm);
    if (rs != DLRT_OK) {
        rc = rt_fail(d, ta.file, rs);
        goto out;
    }
    if (!dlrt_model_has_train_step(rtm)) {
        file_diag(d, ta.file, "the compiled model has no train_step entry point");
        rc = EXIT_INPUT;
        goto out;
    }
    ta.exec.source = base_name(ta.file);
    if ((rs = exec_session_create(rtm, &ta.exec, &s)) != DLRT_OK) {
        rc = rt_fail(d, ta.file, rs);
        goto out;
    }
    if (ta.verbose) {
        fprintf(stderr, "dlcc: %d thread%s\n", dlrt_session_threads(s),
                dlrt_session_threads(s) == 1 ? "" : "s");
    }
    // Data-parallel: rank 0 alone reads --init / --resume; binding broadcasts its state to every
    // rank.
    const char *init = ta.init ? ta.init : ta.resume;
    if (init && dp.rank == 0 && (rs = session_load_mapped(s, init, &lmap)) != DLRT_OK) {
        rc = rt_fail(d, init, rs);
        goto out;
    }
    if (dp.comm && (rs = dlrt_session_bind_comm(s, dp.comm, 0)) != DLRT_OK) {
        rc = rt_fail(d, ta.file, rs);
        goto out;
    }
    if (!dp.comm && ta.chunks > 1 && (rs = dlrt_session_set_chunks(s, (int)ta.chunks)) != DLRT_OK) {
        rc = rt_fail(d, ta.file, rs);
        goto out;
    }
    // Data-parallel with accumulation: each rank (chunk) sums its own micro-batches until the
    // boundary, and a checkpoint holds rank 0's accumulators only (every rank sees the same
    // accum_count: rank 0's step state was broadcast).
    double accumulate = 1, accum_count = 0;
    bool dp_accum = (dp.comm || chunks > 1) &&
                    dlrt_session_get_hparam(s, "accumulate", &accumulate) == DLRT_OK &&
                    accumulate > 1;
    if (dp_accum && ta.resume &&
        dlrt_session_get_hparam(s, "accum_count", &accum_count) == DLRT_OK && accum_count != 0) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                "--resume %s: saved %g micro-steps into an accumulation cycle (accumulate = %g); "
                "it holds rank 0's accumulators only, so a data-parallel run cannot go on from "
                "it exactly (dlcc train writes its --save-every checkpoints at cycle boundaries)",
                ta.resume, accum_count, accumulate);
        rc = EXIT_INPUT;
        goto out;
    }
    if (!ta.has_lr && (rs = dlrt_session_get_hparam(s, "lr", &base_lr)) != DLRT_OK) {
        rc = rt_fail(d, ta.file, rs);
        goto out;
    }

    // 5. Train (the runtime's loop): each step binds its batch's slot as the inputs (zero-copy)
    // and gives it back. Non-finite steps: a warning at the first, a stop after
    // --max-skipped-steps in a row. Progress and the anomaly replay happen in train_event.
    if (ta.detect_anomaly && (st = anomaly_init(&an, m, d)) != DL_OK) {
        rc = st == DL_ERR_NOMEM ? EXIT_INTERNAL : EXIT_INPUT;
        goto out;
    }
    train_progress tp;
    memset(&tp, 0, sizeof tp);
    tp.ta = &ta;
    tp.tm = &tm;
    tp.m = m;
    tp.s = s;
    tp.an = &an;
    tp.d = d;
    tp.tty = isatty(STDERR_FILENO) != 0;
    tp.quiet = dp.rank != 0;
    tp.world = dp.world;
    tp.log = tlog;
    tp.log_step = ta.start_step;
    tp.epoch = -1;
    tp.pos.step = ta.start_step;
    tp.pos.steps_per_epoch = spe;
    tp.pos.epoch_samples = li.epoch_samples;
    tp.pos.batch = B;
    tp.pos.world = dp.world;
    tp.pos.seed = ta.seed;
    tp.pos.time_s = rp.time_s;
    tp.last = tp.pos;
    tp.last.loss_sum = rp.loss_sum;
    tp.last.skipped = rp.skipped;
    tp.last.guard = rp.guard;
    tp.signals = dp.comm == NULL;             // under mpirun, mpirun handles Ctrl-C (see --help)
    to.data_input = tm.x ? tm.x->name : NULL; // --data: every array binds the input of its name
    to.label_input = tm.y ? tm.y->name : NULL;
    tp.ld = ld;
    tp.norm_meta = norm_meta;
    tp.n_norm_meta = n_norm_meta;
    tp.dp_accum = dp_accum;
    to.lr = base_lr;
    to.max_skipped = ta.max_skipped;
    to.callback = train_event;
    to.user = &tp;
    to.start_step = ta.start_step;
    to.start_loss_sum = rp.loss_sum;
    to.start_skipped = rp.skipped;
    to.start_guard = ta.resume ? &rp.guard : NULL;
    dlrt_train_result tr_res;
    if (tp.signals) {
        train_signals_install(); // until the final checkpoint is written
        tp_signals_installed = true;
    }
    log_started = true;
    rs = dlrt_train_run(s, ld, &to, &tr_res);
    if (tp.tty && rs != DLRT_OK) {
        fprintf(stderr, "\r\033[K");
    }
    if (rs != DLRT_OK) {
        rc = rt_fail(d, ta.file, rs);
        goto out;
    }
    if (tr_res.stopped && tp.interrupted) { // Ctrl-C: the checkpoint, and how to go on
        train_log_flush(tlog);
        if (dp.rank == 0 && (rs = train_save(&tp, intr_path, &tp.stop)) != DLRT_OK) {
            rc = rt_fail(d, intr_path, rs);
            goto out;
        }
        train_interrupted_msg(&ta, &tp.stop, intr_path);
        rc = 128 + tp.interrupted;
        goto out;
    }
    if (tr_res.stopped) { // the callback failed: its status
        rc = rt_fail(d, ta.file, tp.rs);
        goto out;
    }
    if (tr_res.diverged && dp.rank != 0) {
        rc = EXIT_DIVERGED; // rank 0 says why
        goto out;
    }
    if (tr_res.diverged) {
        guard_stop_msg("train", tp.desc, tp.stop_step, &tp.g, ta.save, !ta.detect_anomaly);
        rc = EXIT_DIVERGED;
        goto out;
    }
    if (tr_res.nonfinite > 0 && dp.rank == 0) {
        fprintf(stderr, "dlcc train: warning: %lld of %lld steps were non-finite\n",
                (long long)tr_res.nonfinite, (long long)T);
    }

    // 6. Test accuracy, then the checkpoint (last: nothing is written unless all went well).
    // Data-parallel: the ranks' params are identical; rank 0 tests and saves.
    dlrt_eval_result er;
    if (chunks > 1 && (rs = dlrt_session_set_chunks(s, 1)) != DLRT_OK) { // tests one batch a call
        rc = rt_fail(d, ta.file, rs);
        goto out;
    }
    if (test_ld && dp.rank == 0 &&
        (rc = train_test(s, m, &tm, test_ld, ta.file, d, &er)) != EXIT_OK) {
        goto out;
    }
    if (test_ld && tlog) {
        train_log_rec r;
        memset(&r, 0, sizeof r);
        r.is_eval = true;
        r.step = T;
        r.epoch = ta.epochs;
        r.time_s = tp.last.time_s;
        r.eval_loss = er.loss;
        r.eval_acc = er.total && tm.out && tm.y ? (double)er.correct / (double)er.total : NAN;
        r.eval_samples = er.total;
        r.eval_loss_samples = er.loss_samples;
        train_log_write(tlog, &r);
    }
    if ((rc = exec_session_finish(d, s, &ta.exec)) != EXIT_OK) {
        goto out;
    }
    if (ta.save && dp.rank == 0 && (rs = train_save(&tp, ta.save, &tp.last)) != DLRT_OK) {
        rc = rt_fail(d, ta.save, rs);
        goto out;
    }
    if (ta.save && ta.verbose) {
        fprintf(stderr, "dlcc: wrote %s\n", ta.save);
    }
    if (tp.signals && train_signal_pending()) { // it came after the last step: nothing is lost
        fprintf(stderr, "dlcc train: %s after the last step: the run is complete\n",
                train_signal_pending() == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)");
        rc = 128 + train_signal_pending();
    }

out:
    if (tp_signals_installed) {
        train_signals_restore();
    }
    if (!train_log_close(tlog, !log_started && !ta.resume) && rc == EXIT_OK) {
        cli_cmd_error("train", EXIT_INPUT, "--log %s: write failed: %s", ta.log, strerror(errno));
        rc = EXIT_INPUT;
    }
    if (d && !cli_flush_diags(d)) {
        rc = EXIT_INTERNAL;
    }
    anomaly_fini(&an);
    load_map_fini(&lmap);
    dlrt_loader_destroy(test_ld);
    dlrt_loader_destroy(ld);
    dlrt_session_destroy(s);
    dlrt_comm_destroy(dp.comm); // after the session bound to it
    dlrt_model_release(rtm);
    free(art);
    dl_idx_mnist_paths_fini(&mp);
    dl_ir_module_destroy(m);
    dl_diags_destroy(d);
    free(cbinds);
    free(binds.data);
    free(sp);
    for (size_t i = 0; i < n_norm_meta; i++) {
        free(norm_keys[i]);
        free(norm_vals[i]);
    }
    if (ns) {
        train_norms_fini(ns);
    }
    free(ns);
    fflush(stdout);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// dlcc explain: both cache keys, per component, and where the IR differs (ir/ir_diff.c). Also
// what `dlcc-cache explain` runs: the keys need the compiler (its target and version), which the
// cache tool does not link.

typedef struct model_src {
    const char *path;
    char *text; // the file, for the lines of the first difference (NULL: not shown)
    size_t len;
    dl_ir_module *m;
} model_src;

// The source line `line` (1-based), trimmed, into buf.
static void source_line(const model_src *s, uint32_t line, char *buf, size_t size) {
    buf[0] = 0;
    if (!s->text || line == 0) {
        return;
    }
    const char *p = s->text;
    for (uint32_t l = 1; l < line && p; l++) {
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    if (!p) {
        return;
    }
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    while (n > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r')) {
        n--;
    }
    if (n >= size) {
        n = size - 4;
        snprintf(buf, size, "%.*s...", (int)n, p);
        return;
    }
    memcpy(buf, p, n);
    buf[n] = 0;
}

typedef struct explain_flags {
    DL_VEC(dlcc_bind) binds;
    DL_VEC(char *) bind_names; // owned copies of NAME
    const char *cpu, *features, *opt;
    int bad; // a malformed -D already reported
} explain_flags;

static int explain_flag(void *ctx, cli_args *a) {
    const char *cmd = a->cmd;
    explain_flags *f = ctx;
    const char *val = NULL;
    int r = cli_take_flag(a, "-D", NULL, true, &val);
    if (r > 0) {
        const char *eq = strchr(val, '=');
        char *end = NULL;
        if (!eq || eq == val) {
            cli_usage_error(cmd, "-D expects NAME=INT, got '%s'", val);
            return -1;
        }
        errno = 0;
        long long v = strtoll(eq + 1, &end, 10);
        if (eq[1] == 0 || *end != 0 || errno == ERANGE) {
            cli_usage_error(cmd, "-D %.*s: '%s' is not an integer", (int)(eq - val), val, eq + 1);
            return -1;
        }
        char *name = dl_mem_strndup(val, (size_t)(eq - val));
        if (!name || !DL_VEC_PUSH(&f->bind_names, name)) {
            free(name);
            f->bad = EXIT_INTERNAL;
            return -1;
        }
        dlcc_bind b = {name, v};
        if (!DL_VEC_PUSH(&f->binds, b)) {
            f->bad = EXIT_INTERNAL;
            return -1;
        }
        return 1;
    }
    if (r == 0) {
        r = cli_take_flag(a, NULL, "--cpu", true, &f->cpu);
    }
    if (r == 0) {
        r = cli_take_flag(a, NULL, "--features", true, &f->features);
    }
    if (r == 0) {
        r = cli_take_flag(a, "-O", NULL, true, &f->opt);
    }
    return r;
}

static dl_status load_src(model_src *s, const dlcc_options *o, dl_diags *d) {
    dl_status st = dlcc_load_module(s->path, o, d, &s->m);
    if (st != DL_OK) {
        return st;
    }
    if (dl_read_file(s->path, &s->text, &s->len) != DL_OK) {
        s->text = NULL; // lines are a nicety; the module is what counts
    }
    return DL_OK;
}

static void print_explain_text(const model_src *A, const model_src *B, const char *ha,
                               const char *hb, const dlcc_key_part *pa, const dlcc_key_part *pb,
                               const dl_ir_diff *x) {
    bool same = strcmp(ha, hb) == 0;
    printf("A: %s  %s\n", ha, A->path);
    printf("B: %s  %s\n", hb, B->path);
    printf("keys: %s\n", same ? "same (B would reuse A's cache entry)" : "differ");
    for (int i = 0; i < DLCC_KEY_PARTS; i++) {
        printf("  %-9s %s\n", pa[i].name ? pa[i].name : "?",
               dl_hash128_eq(pa[i].hash, pb[i].hash) ? "same" : "differs");
    }
    if (x->has_first) {
        char src_a[512], src_b[512];
        source_line(A, x->line_a, src_a, sizeof src_a);
        source_line(B, x->line_b, src_b, sizeof src_b);
        printf("first difference: node %zu — %s:%u `%s` vs %s:%u `%s`: %s\n", x->node_index,
               A->path, x->line_a, src_a, B->path, x->line_b, src_b, x->first_what);
    }
    for (size_t i = 0; i < x->diffs.len; i++) {
        printf("difference: %s\n", x->diffs.data[i]);
    }
    bool ir_differs = false;
    for (int i = 0; i < DLCC_KEY_PARTS; i++) {
        if (pa[i].name && strcmp(pa[i].name, "ir") == 0 && !dl_hash128_eq(pa[i].hash, pb[i].hash)) {
            ir_differs = true;
        }
    }
    if (ir_differs && !x->has_first && x->diffs.len == 0) {
        printf("note: no node, input, param, output or train setting differs; the IR differs "
               "elsewhere (consts' data)\n");
    }
}

static void print_explain_json(const model_src *A, const model_src *B, const char *ha,
                               const char *hb, const dlcc_key_part *pa, const dlcc_key_part *pb,
                               const dl_ir_diff *x, dl_json *j) {
    dl_json_obj(j);
    dl_json_key(j, "a");
    dl_json_obj(j);
    dl_json_kstr(j, "file", A->path);
    dl_json_kstr(j, "key", ha);
    dl_json_obj_end(j);
    dl_json_key(j, "b");
    dl_json_obj(j);
    dl_json_kstr(j, "file", B->path);
    dl_json_kstr(j, "key", hb);
    dl_json_obj_end(j);
    dl_json_kbool(j, "same", strcmp(ha, hb) == 0);
    dl_json_key(j, "components");
    dl_json_obj(j);
    for (int i = 0; i < DLCC_KEY_PARTS; i++) {
        dl_json_kstr(j, pa[i].name ? pa[i].name : "?",
                     dl_hash128_eq(pa[i].hash, pb[i].hash) ? "same" : "differs");
    }
    dl_json_obj_end(j);
    dl_json_key(j, "first_difference");
    if (x->has_first) {
        dl_json_obj(j);
        dl_json_ku64(j, "node", x->node_index);
        dl_json_ku64(j, "line_a", x->line_a);
        dl_json_ku64(j, "line_b", x->line_b);
        char src_a[512], src_b[512];
        source_line(A, x->line_a, src_a, sizeof src_a);
        source_line(B, x->line_b, src_b, sizeof src_b);
        dl_json_kstr(j, "source_a", src_a);
        dl_json_kstr(j, "source_b", src_b);
        dl_json_kstr(j, "what", x->first_what);
        dl_json_obj_end(j);
    } else {
        dl_json_null(j);
    }
    dl_json_key(j, "differences");
    dl_json_arr(j);
    for (size_t i = 0; i < x->diffs.len; i++) {
        dl_json_str(j, x->diffs.data[i]);
    }
    dl_json_arr_end(j);
    dl_json_obj_end(j);
}

static int cmd_explain(int argc, char **argv) {
    explain_flags f;
    memset(&f, 0, sizeof f);
    model_src A = {0}, B = {0};
    dl_ir_diff x;
    memset(&x, 0, sizeof x);
    dl_diags *d = NULL;
    const char *pos[2] = {NULL, NULL};
    bool json = false;
    int rc = EXIT_OK;
    cli_args a = {"explain", argc, argv, 0, false};
    while (rc == EXIT_OK && a.i < argc) {
        const char *arg = argv[a.i];
        int r;
        if (!a.no_more_flags && strcmp(arg, "--") == 0) {
            a.no_more_flags = true;
            a.i++;
        } else if (!cli_is_flag(&a)) {
            if (pos[1]) {
                rc = cli_usage_error("explain", "unexpected argument '%s'", arg);
            } else {
                pos[pos[0] ? 1 : 0] = arg;
            }
            a.i++;
        } else if (cli_take_flag(&a, NULL, "--json", false, NULL) == 1) {
            json = true;
        } else if ((r = explain_flag(&f, &a)) != 0) {
            rc = r < 0 ? EXIT_USAGE : EXIT_OK;
        } else {
            rc = cli_usage_error("explain", "unknown flag '%s'", arg);
        }
    }
    if (rc == EXIT_OK && !pos[1]) {
        rc = cli_usage_error("explain", "missing model files (A.dlg B.dlg)");
    }
    if (f.bad) {
        rc = f.bad;
    }
    if (rc != EXIT_OK) {
        goto out;
    }
    dlcc_options opt;
    dlcc_options_init(&opt);
    opt.use_cache = false;
    opt.cg.cpu = f.cpu ? f.cpu : opt.cg.cpu;
    opt.cg.features = f.features ? f.features : opt.cg.features;
    if (f.opt) {
        if (strlen(f.opt) != 1 || f.opt[0] < '0' || f.opt[0] > '3') {
            rc = cli_usage_error("explain", "-O expects 0, 1, 2 or 3, got '%s'", f.opt);
            goto out;
        }
        opt.cg.opt_level = f.opt[0] - '0';
    }
    char oerr[256];
    if (dl_cg_options_check(&opt.cg, oerr, sizeof oerr) != DL_OK) {
        rc = cli_usage_error("explain", "%s", oerr);
        goto out;
    }
    opt.binds = f.binds.data;
    opt.n_binds = f.binds.len;
    A.path = pos[0];
    B.path = pos[1];
    if (dl_diags_create(&d) != DL_OK) {
        rc = EXIT_INTERNAL;
        goto out;
    }
    dl_status st = load_src(&A, &opt, d);
    dl_status st2 = load_src(&B, &opt, d);
    if (!cli_flush_diags(d)) {
        rc = EXIT_INTERNAL;
        goto out;
    }
    if (st != DL_OK || st2 != DL_OK) {
        rc = cli_status_exit(st != DL_OK ? st : st2);
        if (rc == EXIT_OK) {
            rc = cli_status_exit(st2);
        }
        goto out;
    }
    dl_hash128 ka, kb;
    dlcc_key_part pa[DLCC_KEY_PARTS], pb[DLCC_KEY_PARTS];
    memset(pa, 0, sizeof pa);
    memset(pb, 0, sizeof pb);
    st = dlcc_key(A.m, &opt, &ka, pa);
    if (st == DL_OK) {
        st = dlcc_key(B.m, &opt, &kb, pb);
    }
    if (st != DL_OK) {
        rc = cli_cmd_error("explain", cli_status_exit(st), "cannot compute the cache key (%s)",
                           dl_status_str(st));
        goto out;
    }
    char ha[33], hb[33];
    dl_hash128_hex(ka, ha);
    dl_hash128_hex(kb, hb);
    if (dl_ir_diff_modules(A.m, B.m, &x) != DL_OK) {
        rc = cli_cmd_error("explain", EXIT_INTERNAL, "out of memory");
        goto out;
    }
    if (json) {
        dl_json j = {0};
        print_explain_json(&A, &B, ha, hb, pa, pb, &x, &j);
        rc = cli_print_json(&j);
    } else {
        print_explain_text(&A, &B, ha, hb, pa, pb, &x);
    }
out:
    for (size_t i = 0; i < f.bind_names.len; i++) {
        free(f.bind_names.data[i]);
    }
    free(f.bind_names.data);
    free(f.binds.data);
    dl_ir_diff_fini(&x);
    dl_ir_module_destroy(A.m);
    dl_ir_module_destroy(B.m);
    free(A.text);
    free(B.text);
    dl_diags_destroy(d);
    return rc;
}

// ---------------------------------------------------------------------------------------------

typedef int (*cmd_fn)(int argc, char **argv);

static const struct {
    const char *name;
    cmd_fn fn;
} commands[] = {{"check", cmd_check},     {"fmt", cmd_fmt},        {"compile", cmd_compile},
                {"run", cmd_run},         {"train", cmd_train},    {"import", cmd_import},
                {"explain", cmd_explain}, {"plot", dlcc_plot_main}};

int main(int argc, char **argv) {
    cli_init("dlcc", helps, DL_ARRAY_LEN(helps));
    if (argc < 2) {
        print_main_help(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        print_main_help(stdout);
        return EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        char target[256];
        dl_cg_target_describe(NULL, target, sizeof target);
        printf("dlcc %s (%s)\nLLVM %s, target %s, artifact format %u, runtime %s\n", DL_VERSION,
               DL_GIT_REV, dl_cg_llvm_version(), target, (unsigned)DLRT_FORMAT_VERSION,
               dlrt_version());
        return EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3) {
            print_main_help(stdout);
            return EXIT_OK;
        }
        const cli_help *h = cli_find_help(argv[2]);
        if (!h) {
            return cli_usage_error(NULL, "no help for unknown command '%s'", argv[2]);
        }
        cli_print_cmd_help(h);
        return EXIT_OK;
    }
    for (size_t i = 0; i < DL_ARRAY_LEN(commands); i++) {
        if (strcmp(cmd, commands[i].name) == 0) {
            if (cli_wants_help(argc - 2, argv + 2)) {
                cli_print_cmd_help(cli_find_help(cmd));
                return EXIT_OK;
            }
            return commands[i].fn(argc - 2, argv + 2);
        }
    }
    if (cmd[0] == '-') {
        return cli_usage_error(NULL, "unknown option '%s'", cmd);
    }
    return cli_usage_error(NULL, "unknown command '%s'", cmd);
}
