"""setup.py — the one thing pyproject.toml cannot say: where the native libraries are.

`pip install ./python` copies the pure-Python package dlcc/ and writes dlcc/_libdir.py into the
built package, recording the absolute directory that holds libdlrt.so and libdlcc.so, taken from
(first match wins):
  1. $DLCC_PREFIX: an installed prefix (`cmake --install build --prefix P`): P/lib, P/lib64 or
     P/lib/<multiarch>;
  2. $DLCC_BUILD_DIR: a build tree;
  3. this repository's build/ (the directory beside python/), when it holds the libraries;
  4. pkg-config's libdir of dlrt (a prefix on PKG_CONFIG_PATH, or /usr/local).
None of them holding both libraries is an error that says what to do. At run time the package
loads the libraries from that directory with no environment ($DLCC_LIBRARY, $DLRT_LIBRARY and
$DLCC_BUILD_DIR still override it); moving or deleting that directory breaks the package, as
uninstalling a C library breaks its users (reinstall the package after reinstalling dlcc).
"""
import os
import subprocess
import sysconfig

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
LIBS = ("libdlrt.so", "libdlcc.so")


def _has_libs(d):
    return bool(d) and all(os.path.isfile(os.path.join(d, f)) for f in LIBS)


def _candidates():
    prefix = os.environ.get("DLCC_PREFIX")
    if prefix:
        multiarch = sysconfig.get_config_var("MULTIARCH") or ""
        for sub in ("lib", "lib64", os.path.join("lib", multiarch)):
            yield "DLCC_PREFIX", os.path.join(prefix, sub)
        return  # asked for this prefix: nothing else
    if os.environ.get("DLCC_BUILD_DIR"):
        yield "DLCC_BUILD_DIR", os.environ["DLCC_BUILD_DIR"]
        return
    yield "the repository's build/", os.path.join(os.path.dirname(HERE), "build")
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "dlrt"], capture_output=True,
                             text=True, check=False)
        if out.returncode == 0 and out.stdout.strip():
            yield "pkg-config dlrt", out.stdout.strip()
    except OSError:
        pass


def find_libdir():
    tried = []
    for how, d in _candidates():
        if _has_libs(d):
            return os.path.realpath(d)
        tried.append(f"{d} ({how})")
    raise SystemExit(
        "dlcc: cannot find libdlrt.so and libdlcc.so; looked in " + ", ".join(tried) + ". "
        "Build dlcc and install it (cmake --install build --prefix P), then run "
        "DLCC_PREFIX=P pip install ./python (or set DLCC_BUILD_DIR to a build tree)."
    )


class BuildPy(build_py):
    def run(self):
        super().run()
        libdir = find_libdir()
        path = os.path.join(self.build_lib, "dlcc", "_libdir.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write("# Written by setup.py at `pip install`: where libdlrt.so and libdlcc.so are.\n")
            f.write(f"LIBDIR = {libdir!r}\n")
        print(f"dlcc: the package will load its libraries from {libdir}")


setup(cmdclass={"build_py": BuildPy})
