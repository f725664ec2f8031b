# bench/openblas_core.sh — sourced by bench/compare.sh and bench/gemm.sh: gives OpenBLAS the
# best kernels it has for this CPU.
#
# usage: openblas_core WORKDIR     (sets OB_NOTE, and exports OPENBLAS_CORETYPE when it chose)
#
# OpenBLAS (and Debian's PyTorch, whose products run in it) picks its kernels by CPU model, and a
# model newer than the library falls back to a generic core: 0.3.21 runs Prescott's SSE3 kernels
# on Intel family 6 model 207 (Emerald Rapids), 15-18 GFLOP/s where SkylakeX's reach ~110. A
# comparison against a crippled competitor is worthless, so where the detected core is such a
# fallback and the CPU has wider vectors, every competitor process gets the best core this
# OpenBLAS has for them (OPENBLAS_CORETYPE, read when the library loads). A caller's own
# OPENBLAS_CORETYPE is kept. OB_NOTE says which core runs and why. Compiles a small probe into
# WORKDIR with cc (needs libopenblas-dev).
openblas_core() {
    local work=$1 detected best= flags
    printf '%s\n' 'char *openblas_get_corename(void);' '#include <stdio.h>' \
        'int main(void) { puts(openblas_get_corename()); return 0; }' >"$work/ob_core.c"
    cc -O2 "$work/ob_core.c" -o "$work/ob_core" -lopenblas
    detected=$(env -u OPENBLAS_CORETYPE "$work/ob_core")
    if [ -n "${OPENBLAS_CORETYPE:-}" ]; then
        OB_NOTE="core $("$work/ob_core"), OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE from the caller (detected: $detected)"
        return
    fi
    case $detected in
    Prescott | Nehalem | Core2 | Penryn | Dunnington | Katmai | Coppermine | Northwood | Banias | Atom)
        flags=$(grep -m1 '^flags' /proc/cpuinfo)
        case " $flags " in
        *" avx512_bf16 "*) best=Cooperlake ;;
        *" avx512f "*) best=SkylakeX ;;
        *" avx2 "*) best=Haswell ;;
        esac
        ;;
    esac
    if [ -n "$best" ]; then
        export OPENBLAS_CORETYPE=$best
        OB_NOTE="core $("$work/ob_core"): OPENBLAS_CORETYPE=$best set by the script, the library detected $detected on this CPU"
    else
        OB_NOTE="core $detected (as detected)"
    fi
}
