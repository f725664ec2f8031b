#!/usr/bin/python3
"""Trains samples/mlp_fmnist.dlg on Fashion-MNIST through the dlcc Python binding, the way
`dlcc train samples/mlp_fmnist.dlg --dataset fashion-mnist` does: pixels x/255 normalised with
the mean and standard deviation of the training samples used, a new seeded random order every
epoch, full batches (the final partial batch is dropped), one compiled train step per batch,
then the test set classified by the infer entry point (argmax of the model's `probs` output,
or of its one [N, classes] output, e.g. `logits`).

The batches come from dlcc.Loader (libdlrt's data loader): --loader-threads producer threads
decode the IDX files into a ring of --prefetch batch slots while the session trains, and each
step reads its batch straight from the loader's slot (zero-copy input binding, no copy in
Python). The test set goes through a second loader in file order whose final partial batch is
padded (only its n_valid real rows are counted), normalised with the training loader's values.

Prints per epoch 'epoch E: mean loss L, T s, S samples/s, skipped K', then the loader's waits
'epoch E: loader wait W ms/batch mean, M ms max' (the first batch of the run, which includes the
producers' start-up, is left out of both), and at the end 'test accuracy: A (CORRECT/TOTAL)'.

Divergence, as in `dlcc train`: the first non-finite step (a NaN / Inf loss, or an update the
runtime skipped for a non-finite gradient) is reported on stderr, and after N =
--max-skipped-steps of them in a row, or with fewer than N finite steps between any two (default
10; 0: never stop), training stops with exit status 4 and nothing is saved. With dynamic loss scaling a skipped step with a finite loss while the scale is above 1 and
going down is the scaler backing off, not divergence.

    DLCC_BUILD_DIR=build /usr/bin/python3 samples/train_fmnist.py --epochs 1 --threads 1

$DLCC_FMNIST_LIMIT (or --limit-train N) uses only the first N training samples, and
$DLCC_FMNIST_TEST_LIMIT (or --limit-test N) the first N test samples (for quick tests).
The model may be any classifier with one float32 input (the images, 784 values per sample in
any shape) and one integer input (the labels, int64 or int32: the loader makes that type).
"""

import argparse
import os
import sys

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "python"))
import dlcc  # noqa: E402


def model_io(model, batch):
    """(image input, label input, score output) of `model`: its one float32 input,
    [batch, ...], its one integer input [batch], and `probs` or its one [batch, C] output."""
    floats = [d for d in model.inputs if d.dtype_name == "float32"]
    ints = [d for d in model.inputs if d.dtype_name in ("int64", "int32")]
    if len(floats) != 1 or len(ints) != 1 or len(model.inputs) != 2:
        sys.exit(
            f"train_fmnist: {model.name} needs one float32 input (images) and one int64 or "
            f"int32 input (labels); it has {[(d.name, d.dtype_name) for d in model.inputs]}"
        )
    x, y = floats[0], ints[0]
    if not x.shape or x.shape[0] != batch:
        sys.exit(f"train_fmnist: image input '{x.name}' {list(x.shape)} is not [{batch}, ...]")
    if y.shape != (batch,):
        sys.exit(f"train_fmnist: label input '{y.name}' {list(y.shape)} is not [{batch}]")
    # The class scores: `probs`, else the one [batch, classes] float output (e.g. logits; the
    # argmax is the same).
    scores = [d for d in model.outputs if d.name == "probs"] or [
        d for d in model.outputs if len(d.shape) == 2 and d.shape[0] == batch
    ]
    if len(scores) != 1:
        sys.exit(f"train_fmnist: {model.name} has no 'probs' output nor one [{batch}, C] output")
    return x, y, scores[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=os.path.join(_HERE, "mlp_fmnist.dlg"))
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--limit-train", type=int, default=int(os.environ.get("DLCC_FMNIST_LIMIT", 0)))
    ap.add_argument(
        "--limit-test", type=int, default=int(os.environ.get("DLCC_FMNIST_TEST_LIMIT", 0))
    )
    ap.add_argument("--loader-threads", type=int, default=2, help="loader producer threads")
    ap.add_argument("--prefetch", type=int, default=4, help="loader batch slots")
    ap.add_argument("--save", default=None, help="write a safetensors checkpoint at the end")
    ap.add_argument(
        "--max-skipped-steps", type=int, default=10,
        help="stop (exit 4) after this many non-finite steps without as many finite ones in a "
        "row between them; 0: never",
    )
    args = ap.parse_args()
    if args.epochs < 1:
        sys.exit("train_fmnist: --epochs must be >= 1")
    if args.max_skipped_steps < 0:
        sys.exit("train_fmnist: --max-skipped-steps must be >= 0")

    B = args.batch
    model = dlcc.compile(args.model, dims={"N": B})
    d = args.data
    common = dict(
        batch_size=B,
        producers=args.loader_threads,
        slots=args.prefetch,
        scale=1.0 / 255.0,
    )
    xd, yd, sd = model_io(model, B)
    scores = sd.name
    common["n_classes"] = sd.shape[1]  # labels outside [0, classes) are refused at creation
    try:
        train = dlcc.Loader.idx(
            os.path.join(d, "train-images-idx3-ubyte.gz"),
            os.path.join(d, "train-labels-idx1-ubyte.gz"),
            seed=args.seed,
            shuffle=True,
            last="drop",
            normalize="compute",
            epochs=args.epochs,
            limit=max(args.limit_train, 0),
            label_dtype=yd.dtype,  # the model's label dtype decides the loader's (int64 / int32)
            **common,
        )
    except dlcc.Error as e:
        sys.exit(f"train_fmnist: {e}")
    if int(np.prod(xd.shape)) != B * train.info.sample_numel:
        sys.exit(
            f"train_fmnist: input '{xd.name}' {list(xd.shape)} does not hold {B} samples of "
            f"{list(train.info.sample_dims)}"
        )
    s = model.session(threads=args.threads)
    if args.lr is not None:
        s.set_hparam("lr", args.lr)
    n_batches = train.info.batches_per_epoch
    print(
        f"model {model.name}: {train.info.n_samples} training samples, {n_batches} batches of "
        f"{B}, {s.threads} threads, loader {args.loader_threads} threads x {args.prefetch} slots",
        flush=True,
    )

    # The runtime's training loop (Session.train, shared with `dlcc train` and the C sample):
    # each batch is bound in place, the non-finite guard watches every step; the callback
    # prints what this trainer shows.
    waits = []

    def on_event(ev):
        if ev.kind == "step":
            if ev.batch_seq > 0:
                waits.append(ev.batch_wait_ms)
            where = f"step {ev.step + 1} (epoch {ev.epoch + 1}, batch {ev.batch + 1})"
            if ev.nonfinite and ev.first_nonfinite:
                print(
                    f"train_fmnist: warning: {where} is non-finite (loss {ev.info.loss:.4g}, "
                    f"grad_norm {ev.info.grad_norm:.4g})"
                    + ("; its update was skipped" if ev.info.skipped else ""),
                    file=sys.stderr, flush=True,
                )
            if ev.nonfinite and ev.stop:
                print(
                    f"train_fmnist: error: training diverged at {where}: {ev.streak} non-finite "
                    f"steps without {ev.max_skipped} finite ones in a row between them "
                    f"(--max-skipped-steps {ev.max_skipped}); nothing saved",
                    file=sys.stderr, flush=True,
                )
        elif ev.kind == "epoch":
            dt = ev.epoch_s
            print(
                f"epoch {ev.epoch + 1}: mean loss {ev.loss_sum / n_batches:.6g}, {dt:.2f} s, "
                f"{n_batches * B / dt:.0f} samples/s, skipped {ev.skipped}",
                flush=True,
            )
            mean_wait = sum(waits) / len(waits) if waits else 0.0
            max_wait = max(waits) if waits else 0.0
            print(
                f"epoch {ev.epoch + 1}: loader wait {mean_wait:.3f} ms/batch mean, "
                f"{max_wait:.3f} ms max",
                flush=True,
            )
            waits.clear()

    result = s.train(train, xd.name, yd.name, epochs=args.epochs,
                     max_skipped_steps=args.max_skipped_steps, callback=on_event)
    if result.diverged:
        sys.exit(4)

    # Test: file order, the final batch padded (its padding rows are not counted; their label,
    # -1, contributes nothing to the loss), normalised as the training data.
    try:
        test = dlcc.Loader.idx(
            os.path.join(d, "t10k-images-idx3-ubyte.gz"),
            os.path.join(d, "t10k-labels-idx1-ubyte.gz"),
            shuffle=False,
            last="pad",
            normalize=(train.info.mean, train.info.std),
            epochs=1,
            limit=max(args.limit_test, 0),
            label_dtype=yd.dtype,
            **common,
        )
    except dlcc.Error as e:
        sys.exit(f"train_fmnist: {e}")
    train.close()
    correct, total = s.evaluate_accuracy(test, xd.name, yd.name, scores)
    test.close()
    print(f"test accuracy: {correct / total:.4f} ({correct}/{total})", flush=True)
    if args.save:
        s.save(args.save)


if __name__ == "__main__":
    main()
