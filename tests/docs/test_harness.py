#!/usr/bin/python3
"""Tests of tests/docs/run_doc_blocks.py: a document with a wrong block must fail, with the
reason named; a document whose blocks are right must pass.

usage: test_harness.py BUILD_DIR SOURCE_DIR
"""

import os
import subprocess
import sys
import tempfile

HARNESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_doc_blocks.py")

GOOD_MODEL = "model ok\ninput x : float[2]\ny = Relu (x)\noutput y\n"
BAD_MODEL = "model bad\ninput x : float[2, 3]\ny = MatMul (x, x)\noutput y\n"

# (name, document, text the harness's output must contain)
FAILING = [
    ("dlg that does not check", "```dlg\n" + BAD_MODEL + "```\n", "`dlcc check` failed"),
    ("dlg error that checks", "```dlg error\n" + GOOD_MODEL + "```\n",
     "shown as an error, but `dlcc check` exited 0"),
    ("error directive on a model that checks",
     "<!-- doc-test: error -->\n```dlg\n" + GOOD_MODEL + "```\n", "shown as an error"),
    ("an untagged block", "```\n" + GOOD_MODEL + "```\n", "every code block needs one of"),
    ("an unknown info string", "```yaml\na: 1\n```\n", "info string 'yaml'"),
    ("a command that fails", "```sh\nfalse\n```\n", "`false` exited 1, expected 0"),
    ("a usage error shown as success", "```sh\ndlcc check --no-such-flag\n```\n", "exited 2"),
    ("the wrong documented exit status",
     "<!-- doc-test: exit 2 -->\n```sh\ntrue\n```\n", "exited 0, expected 2"),
    ("console output that differs", "```console\n$ echo hello\nhallo\n```\n",
     "the output differs"),
    ("console numbers that differ",
     "```console\n$ echo step 1 loss 2.5\nstep 1 loss 2.25\n```\n", "the output differs"),
    ("a missing output line", "```console\n$ printf 'a\\n'\na\nb\n```\n", "the output differs"),
    ("an extra output line", "```console\n$ printf 'a\\nb\\n'\na\n```\n", "the output differs"),
    ("a caret moved", "<!-- doc-test: file bad.dlg -->\n```dlg error\n" + BAD_MODEL +
     "```\n\n<!-- doc-test: exit 1 -->\n```console\n$ dlcc check bad.dlg\n"
     "bad.dlg:3:5: error: MatMul 'y': inner dimensions differ: [2, 3] x [2, 3]\n"
     "    3 | y = MatMul (x, x)\n      |    ^~~~~~\n```\n", "the output differs"),
    ("a text block holding a session", "```text\n$ dlcc check a.dlg\n```\n",
     "tag it console"),
    ("a text block holding a model", "```text\n" + GOOD_MODEL + "```\n", "tag it dlg"),
    ("skip without a reason", "<!-- doc-test: skip -->\n```sh\ntrue\n```\n",
     "'skip' needs a reason"),
    ("an unknown directive", "<!-- doc-test: ignore-me -->\n```sh\ntrue\n```\n",
     "unknown doc-test directive"),
    ("a directive far from its block", "<!-- doc-test: exit 1 -->\nSome prose.\n\n```sh\ntrue\n```\n",
     "not followed by a code block"),
    ("a failing setup", "<!-- doc-test: setup false -->\n```sh\ntrue\n```\n", "setup `false` failed"),
    ("a C fragment with a wrong API", "```c\ndlrt_session *s;\ndlrt_session_infer(s, 1);\n```\n",
     "does not compile"),
    ("a C fragment with an undeclared name", "```c\ndlrt_session_infer(s);\n```\n",
     "does not compile"),
    ("a C program with a warning", "```c\nint main(void) {\n    int x;\n    return x;\n}\n```\n",
     "does not compile"),
    ("invalid Python", "```python\ndef f(:\n```\n", "not valid Python"),
    ("a python block that fails to run", "<!-- doc-test: run -->\n```python\nraise SystemExit(3)\n```\n",
     "failed (status 3)"),
    ("an unterminated block", "```sh\ntrue\n", "unterminated code block"),
    ("a wrong exit status in prose", "Exit status: 0 success, 3 out of memory.\n",
     "exit status 3 is 'out of memory' here but"),
    ("a link outside the repository", "See [the design](../../shared/ARCHITECTURE.md).\n",
     "is outside the repository"),
    ("a path that does not exist", "The parser is `frontend/no_such_file.c`.\n",
     "`frontend/no_such_file.c` does not exist"),
]

PASSING = """# A document whose blocks are right

Exit status: 0 success, 1 invalid input, 2 bad usage. The parser is `frontend/`.

```dlg
""" + GOOD_MODEL + """```

<!-- doc-test: file bad.dlg -->
```dlg error
""" + BAD_MODEL + """```

<!-- doc-test: exit 1 -->
```console
$ dlcc check bad.dlg
bad.dlg:3:5: error: MatMul 'y': inner dimensions differ: [2, 3] x [2, 3]
    3 | y = MatMul (x, x)
      |     ^~~~~~
```

<!-- doc-test: numbers-vary -->
```console
$ echo step 1 loss 2.5 key 0123456789abcdef
step 7 loss 3.25 key fedcba9876543210
$ printf 'a\\nb\\nc\\nd\\n'
a
...
d
$ echo the time is 12 ms
the ... is 12 ms
```

<!-- doc-test: setup mknpy x.npy float32 2 -->
```sh
dlcc run block1.dlg --backend ref --in x=x.npy   # block 1 was written to block1.dlg
test -L samples || cp samples/mlp_fmnist.dlg /dev/null
```

<!-- doc-test: skip needs three machines -->
```sh
mpirun -n 3 nothing-here
```

<!-- doc-test: c-declare dlrt_session *s = NULL; -->
```c
dlrt_session_infer(s);
```

```text
dlcc run FILE [--in NAME=PATH]...
```

```python
import os
print(os.getcwd())
```
"""


def run(doc_text, build, src, tmp, name):
    path = os.path.join(tmp, name + ".md")
    with open(path, "w") as f:
        f.write(doc_text)
    p = subprocess.run(["/usr/bin/python3", HARNESS, "--build-dir", build, "--source-dir", src,
                        path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def main():
    build, src = sys.argv[1], sys.argv[2]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        # The path check resolves links against the repository: documents live in a folder
        # of the source tree's shape (links two levels up leave it).
        docdir = os.path.join(tmp, "docs")
        os.mkdir(docdir)
        for i, (what, doc, want) in enumerate(FAILING):
            rc, out = run(doc, build, src, docdir, "case%d" % i)
            if rc != 1 or want not in out:
                failures += 1
                print("FAIL: %s: expected exit 1 and %r, got exit %d:\n%s" % (what, want, rc, out))
            else:
                print("ok: %s is reported" % what)
        rc, out = run(PASSING, build, src, docdir, "passing")
        if rc != 0 or "0 failed, 0 other problems" not in out or "1 skipped" not in out:
            failures += 1
            print("FAIL: the passing document:\n%s" % out)
        else:
            print("ok: the passing document passes")
    print("%d failures" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
