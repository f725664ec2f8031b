// codegen/x86/x86_link.c — packaging for x86-64: the plan blob and the kernel table become
// globals of the module with the exported descriptor dlcc_artifact_v1 (runtime/dlrt_format.h),
// and the emitted object is linked into an ELF shared object by ld.lld (else cc), with libm for
// the kernels' math calls.
//
// Determinism: the link runs in a private temporary directory whose name never reaches the
// output (the object's source file name is fixed); the linker's own output is deterministic.
#include "cg_internal.h"
#include "x86/x86.h"

#include <llvm-c/Core.h>

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

// Adds @dlcc_plan, @dlcc_fns and the exported descriptor @dlcc_artifact_v1. A device plan (its
// kernels in the plan's device image, codegen/nvptx/) has no host code: the descriptor carries
// the plan's kernel count and no table.
void dl_cg__x86_add_artifact_globals(cg *c, const uint8_t *plan, size_t plan_len) {
    LLVMValueRef pdata =
        LLVMConstStringInContext(c->ctx, (const char *)plan, (unsigned)plan_len, 1);
    LLVMValueRef gplan = LLVMAddGlobal(c->mod, LLVMTypeOf(pdata), "dlcc_plan");
    LLVMSetInitializer(gplan, pdata);
    LLVMSetGlobalConstant(gplan, 1);
    LLVMSetLinkage(gplan, LLVMPrivateLinkage);
    LLVMSetAlignment(gplan, DLRT_BUFFER_ALIGN);

    dlrt_plan_hdr h;
    DL_ASSERT(plan_len >= sizeof h);
    memcpy(&h, plan, sizeof h);
    uint32_t n_fns = (uint32_t)c->fns.len;
    LLVMValueRef table = LLVMConstNull(c->t_ptr);
    if (h.device == DLRT_PLAN_DEVICE_CPU) {
        LLVMTypeRef fns_ty = LLVMArrayType2(c->t_ptr, c->fns.len);
        LLVMValueRef gfns = LLVMAddGlobal(c->mod, fns_ty, "dlcc_fns");
        LLVMSetInitializer(gfns, LLVMConstArray2(c->t_ptr, c->fns.data, c->fns.len));
        LLVMSetGlobalConstant(gfns, 1);
        LLVMSetLinkage(gfns, LLVMPrivateLinkage);
        table = gfns;
    } else {
        DL_ASSERT(c->fns.len == 0);
        n_fns = h.n_fns;
    }

    LLVMTypeRef fields[5] = {c->t_i32, c->t_i32, c->t_ptr, c->t_i64, c->t_ptr};
    LLVMTypeRef desc_ty = LLVMStructTypeInContext(c->ctx, fields, 5, 0);
    LLVMValueRef vals[5] = {LLVMConstInt(c->t_i32, DLRT_FORMAT_VERSION, 0),
                            LLVMConstInt(c->t_i32, n_fns, 0), gplan,
                            LLVMConstInt(c->t_i64, plan_len, 0), table};
    LLVMValueRef gdesc = LLVMAddGlobal(c->mod, desc_ty, DLRT_ARTIFACT_SYMBOL);
    LLVMSetInitializer(gdesc, LLVMConstNamedStruct(desc_ty, vals, 5));
    LLVMSetGlobalConstant(gdesc, 1);
    LLVMSetVisibility(gdesc, LLVMDefaultVisibility);
}

// ---------------------------------------------------------------------------------------------
// Linking (ld.lld, else cc) into an ELF shared object

static char *find_on_path(const char *name) {
    if (strchr(name, '/')) {
        return access(name, X_OK) == 0 ? dl_mem_strdup(name) : NULL;
    }
    const char *path = getenv("PATH");
    if (!path || !*path) {
        path = "/usr/local/bin:/usr/bin:/bin";
    }
    const char *p = path;
    while (*p) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char buf[4096];
        if (n > 0 && n + strlen(name) + 2 < sizeof buf) {
            memcpy(buf, p, n);
            buf[n] = '/';
            strcpy(buf + n + 1, name);
            if (access(buf, X_OK) == 0) {
                return dl_mem_strdup(buf);
            }
        }
        p = e ? e + 1 : p + n;
    }
    return NULL;
}

static bool is_lld(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "ld.lld", 6) == 0 || strncmp(base, "ld", 2) == 0;
}

static dl_status run_linker(cg *c, const dl_cg_options *o, const char *dir, const char *obj,
                            const char *so) {
    const char *cands[] = {o->linker, getenv("DLCC_LD"), "ld.lld-19", "ld.lld", "cc"};
    char *ld = NULL;
    for (size_t i = 0; i < DL_ARRAY_LEN(cands) && !ld; i++) {
        if (cands[i] && cands[i][0]) {
            ld = find_on_path(cands[i]);
            if (!ld && i < 2) {
                dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC,
                        "linker '%s' not found (set by %s); install lld-19 or unset it", cands[i],
                        i == 0 ? "--linker" : "DLCC_LD");
                return DL_ERR_BACKEND;
            }
        }
    }
    if (!ld) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC,
                "no linker found: dlcc links artifacts with ld.lld-19, ld.lld or cc; install "
                "Debian's lld-19 (tools/setup.sh does) or set DLCC_LD");
        return DL_ERR_BACKEND;
    }
    char log[4200];
    snprintf(log, sizeof log, "%s/link.log", dir);
    const char *argv_lld[] = {ld,
                              "-shared",
                              "--hash-style=gnu",
                              "-z",
                              "noexecstack",
                              "-o",
                              so,
                              obj,
                              "-L/usr/lib/x86_64-linux-gnu",
                              "-L/lib/x86_64-linux-gnu",
                              "--as-needed",
                              "-lm",
                              NULL};
    const char *argv_cc[] = {ld, "-shared", "-o", so, obj, "-lm", NULL};
    const char *const *argv = is_lld(ld) ? argv_lld : argv_cc;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    // posix_spawn takes char *const[] for historical reasons and never writes the strings.
    char *const *av;
    memcpy(&av, &argv, sizeof av);
    int rc = posix_spawn(&pid, ld, &fa, NULL, av, environ);
    posix_spawn_file_actions_destroy(&fa);
    dl_status st = DL_OK;
    if (rc != 0) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "cannot run linker %s: %s", ld, strerror(rc));
        st = DL_ERR_BACKEND;
    } else {
        int ws = 0;
        while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            char *text = NULL;
            size_t len = 0;
            if (dl_read_file(log, &text, &len) != DL_OK) {
                text = NULL;
            }
            dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "linker %s failed: %s", ld,
                    text && len ? text : "(no output)");
            free(text);
            st = DL_ERR_BACKEND;
        }
    }
    free(ld);
    return st;
}

dl_status dl_cg__x86_link_object(cg *c, const dl_cg_options *o, const char *obj_data,
                                 size_t obj_len, uint8_t **out, size_t *out_len) {
    const char *tmp = getenv("TMPDIR");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/dlcc-link-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "cannot create a temporary directory in %s: %s",
                tmp && *tmp ? tmp : "/tmp", strerror(errno));
        return DL_ERR_IO;
    }
    char obj[4200], so[4200], log[4200];
    snprintf(obj, sizeof obj, "%s/kernels.o", dir);
    snprintf(so, sizeof so, "%s/artifact.so", dir);
    snprintf(log, sizeof log, "%s/link.log", dir);
    dl_status st = dl_write_file_atomic(obj, obj_data, obj_len);
    if (st != DL_OK) {
        dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "cannot write %s: %s", obj, strerror(errno));
    } else if ((st = run_linker(c, o, dir, obj, so)) == DL_OK) {
        char *bytes = NULL;
        st = dl_read_file(so, &bytes, out_len);
        *out = (uint8_t *)bytes;
        if (st != DL_OK) {
            dl_diag(c->d, DL_SEV_ERROR, DL_NO_LOC, "cannot read the linked artifact: %s",
                    strerror(errno));
        }
    }
    unlink(obj);
    unlink(so);
    unlink(log);
    rmdir(dir);
    return st;
}
