#!/usr/bin/python3
"""Runs the code blocks of Markdown documentation as tests, so the docs cannot drift.

usage: run_doc_blocks.py --build-dir DIR --source-dir DIR [--keep] [--list] [--only N] DOC.md...
       run_doc_blocks.py mknpy FILE DTYPE DIMS [MAX]     (fixture helper, also on PATH as mknpy)

Every fenced block needs an info string; what happens to it depends on the first word:

  dlg              written to a file in the scratch directory (`block<N>.dlg`, or the name given
                   by a `file` directive; later blocks can use it) and must pass `dlcc check`.
  dlg error        (or a `dlg` block after an `error` directive) must FAIL `dlcc check` with exit
                   status 1. Show the message with a console block that runs `dlcc check` on it.
  sh, bash         every command (a line, joined with the next while it ends in `\\`; blank and
                   comment lines skipped) is run by bash in the scratch directory and must exit 0
                   (or the `exit` directive's status). These blocks show no output.
  console          lines starting with `$ ` are commands (run as above); the lines after a
                   command, up to the next one, are its expected output (stdout and stderr
                   together), exactly but for trailing spaces and leading/trailing blank lines;
                   a line `...` stands for any number of lines and `...` inside a line for any
                   text. With the `numbers-vary` directive every number (and every hexadecimal
                   string of 8 or more digits) matches any other, and runs of spaces compare
                   equal (columns move with the numbers). A command without output lines has
                   only its exit status checked.
  c                a whole program (it defines `int main`) is written to a file (the `file`
                   directive's name, default block<N>.c) and compiled with gcc -Werror -Wall
                   -Wextra; show its build command in an sh/console block, which then runs.
                   Any other block is a fragment: it is placed in a function body after the
                   declarations of a `c-declare` directive and compiled with -fsyntax-only.
  python           syntax-checked; with the `run` directive also run by /usr/bin/python3 in the
                   scratch directory.
  text             not run: synopses, diagrams, measured output of a command that cannot run in
                   a test. A text block that looks like a command session (`$ `) or a model
                   (`model NAME`) is an error: use console or dlg.

Directives are HTML comments (invisible when rendered) right before a block, only blank lines
or other directives in between, one per comment:

  <!-- doc-test: skip REASON -->        do not run this block (REASON is required)
  <!-- doc-test: setup COMMAND -->      run COMMAND (bash, may span lines) before the block
  <!-- doc-test: exit N -->             every command of the block must exit with status N
  <!-- doc-test: file NAME -->          the file a dlg block is written to
  <!-- doc-test: error -->              the dlg block must fail `dlcc check`
  <!-- doc-test: numbers-vary -->       numbers in the shown output are examples
  <!-- doc-test: timeout SECONDS -->    per-command limit (default 60)
  <!-- doc-test: c-declare DECLS -->    declarations in front of a C fragment
  <!-- doc-test: run -->                run a python block, not only compile it

The scratch directory (one per document, removed afterwards unless --keep) looks like the
repository root: every top-level entry of the source tree is symlinked into it except
`samples/`, which is copied, and `build/`, a directory of links to the top-level files of the
build directory under test (`build/dlcc`, `build/libdlrt.so`, `build/train_fmnist`, ...). PATH
starts with a directory holding `dlcc`, `dlcc-cache`, `python3` (/usr/bin/python3) and `mknpy` (FILE DTYPE DIMS [MAX]: a
deterministic .npy; floats in [0, 1), integers in [0, MAX) with MAX 10 by default). The
environment has a private DLCC_CACHE_DIR and HOME, PYTHONPATH for the binding and its
DLCC_BUILD_DIR / DLCC_LIBRARY / DLRT_LIBRARY.

Besides the blocks: relative links must point at files of the repository, and every
`dir/file` path in backticks whose first folder is a top-level folder of the repository must
exist (globs allowed). Every statement of an exit status in the document ("exit status: 0 success,
1 ...", "exit 3 = ...") must give each code the meaning `dlcc --help` / `dlcc-cache --help`
give it, and README.md must list every code.

Exits 0 when every block passed (skipped blocks are reported), 1 otherwise.
"""

import ast
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*(.*)$")
DIRECTIVE = re.compile(r"<!--\s*doc-test:\s*([A-Za-z][\w-]*)(.*?)-->", re.S)
KNOWN_DIRECTIVES = {"skip", "setup", "exit", "file", "error", "numbers-vary", "timeout", "c-declare",
                    "run"}
LANGS = {"dlg", "sh", "bash", "console", "c", "python", "text"}
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
HEX = r"[0-9a-fA-F]{8,}"


# ------------------------------------------------------------------------------------------
# .npy fixtures


def mknpy(path, dtype, dims, maxval=10):
    """Writes a deterministic .npy (format 1.0, C order) without NumPy."""
    codes = {"float32": ("<f4", "f"), "float64": ("<f8", "d"), "int64": ("<i8", "q"),
             "int32": ("<i4", "i"), "uint8": ("|u1", "B"), "bool": ("|b1", "B"),
             "float16": ("<f2", "e")}
    if dtype not in codes:
        raise SystemExit("mknpy: unknown dtype %s (one of %s)" % (dtype, ", ".join(codes)))
    descr, fmt = codes[dtype]
    shape = tuple(int(d) for d in dims.split(",") if d != "") if dims not in ("", "scalar") else ()
    n = 1
    for d in shape:
        n *= d
    state = 0x9E3779B97F4A7C15
    values = []
    for _ in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        r = (state >> 11) / float(1 << 53)
        if dtype.startswith("float"):
            values.append(r)
        elif dtype == "bool":
            values.append(int(r * 2))
        else:
            values.append(int(r * maxval))
    shape_txt = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_txt)
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * (pad % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (n, fmt), *values))


# ------------------------------------------------------------------------------------------
# Markdown parsing


class Block:
    def __init__(self, doc, line, lang, extra, text, directives):
        self.doc = doc
        self.line = line          # 1-based line of the opening fence
        self.lang = lang
        self.extra = extra        # rest of the info string
        self.text = text
        self.directives = directives  # list of (keyword, argument)

    def get(self, key):
        for k, v in self.directives:
            if k == key:
                return v
        return None

    def has(self, key):
        return any(k == key for k, _ in self.directives)

    def where(self):
        return "%s:%d" % (os.path.basename(self.doc), self.line)


def parse_blocks(path, errors):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = []
    pending = []          # directives waiting for their block
    pending_line = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        m = FENCE.match(line)
        if m:
            indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
            body = []
            j = i + 1
            while j < len(lines):
                c = FENCE.match(lines[j])
                if c and c.group(2).startswith(fence[0] * len(fence)) and c.group(3).strip() == "":
                    break
                l = lines[j]
                body.append(l[len(indent):] if l.startswith(indent) else l.lstrip())
                j += 1
            if j == len(lines):
                errors.append("%s:%d: unterminated code block" % (path, i + 1))
            words = info.split()
            lang = words[0] if words else ""
            extra = words[1:]
            blocks.append(Block(path, i + 1, lang, extra, "\n".join(body), pending))
            pending = []
            i = j + 1
            continue
        # Directives (possibly several per line, possibly spanning lines).
        if "<!--" in line and "doc-test" in line:
            text = line
            k = i
            while "-->" not in text and k + 1 < len(lines):
                k += 1
                text += "\n" + lines[k]
            rest = DIRECTIVE.sub("", text).strip()
            found = DIRECTIVE.findall(text)
            if not found:
                errors.append("%s:%d: malformed doc-test directive" % (path, i + 1))
            for kw, arg in found:
                arg = arg.strip()
                if kw not in KNOWN_DIRECTIVES:
                    errors.append("%s:%d: unknown doc-test directive '%s'" % (path, i + 1, kw))
                if kw == "skip" and not arg:
                    errors.append("%s:%d: 'skip' needs a reason" % (path, i + 1))
                pending.append((kw, arg))
                pending_line = i + 1
            if rest:
                errors.append("%s:%d: text beside a doc-test directive" % (path, i + 1))
            i = k + 1
            continue
        if pending and line.strip():
            errors.append("%s:%d: doc-test directive not followed by a code block" %
                          (path, pending_line))
            pending = []
        i += 1
    if pending:
        errors.append("%s:%d: doc-test directive not followed by a code block" %
                      (path, pending_line))
    return blocks


def commands_of(text, console):
    """(command, expected output lines or None) pairs of an sh or console block."""
    out = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if console:
            if not line.startswith("$ ") and line.strip() != "$":
                if out:
                    out[-1][1].append(line)
                elif line.strip():
                    raise ValueError("console block: output before the first '$ ' command")
                i += 1
                continue
            line = line[2:]
        elif not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        cmd = line
        while cmd.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd.rstrip()[:-1] + " " + lines[i].strip()
        out.append((cmd.strip(), []))
        i += 1
    return [(c, o if console else None) for c, o in out]


# ------------------------------------------------------------------------------------------
# Output comparison


def norm_lines(text, collapse):
    lines = [l.rstrip() for l in text.replace("\r", "").split("\n")]
    if collapse:
        lines = [re.sub(r"\s+", " ", l).strip() for l in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


def line_regex(expected, numbers_vary):
    parts = re.split(r"(\.\.\.|…)", expected)
    rx = ""
    for p in parts:
        if p in ("...", "…"):
            rx += ".*"
            continue
        if numbers_vary:
            pieces = re.split(r"(%s|%s)" % (HEX, NUMBER), p)
            for k, piece in enumerate(pieces):
                if k % 2:
                    rx += "(?:%s|%s)" % (HEX, NUMBER)
                else:
                    rx += re.escape(piece)
        else:
            rx += re.escape(p)
    return re.compile(rx + r"\Z")


def output_matches(expected_lines, actual_text, numbers_vary):
    exp = norm_lines("\n".join(expected_lines), numbers_vary)
    act = norm_lines(actual_text, numbers_vary)
    rxs = [None if e in ("...", "…") else line_regex(e, numbers_vary) for e in exp]
    memo = {}

    def match(i, j):
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(rxs):
            r = j == len(act)
        elif rxs[i] is None:
            r = any(match(i + 1, k) for k in range(j, len(act) + 1))
        else:
            r = j < len(act) and rxs[i].match(act[j]) is not None and match(i + 1, j + 1)
        memo[key] = r
        return r

    return match(0, 0)


# ------------------------------------------------------------------------------------------
# Running


class Runner:
    def __init__(self, args, doc):
        self.args = args
        self.doc = doc
        self.failures = []
        self.skipped = []
        self.passed = 0
        self.scratch = tempfile.mkdtemp(prefix="dlcc-doc-%s-" % os.path.basename(doc)[:-3])
        self._populate()

    def _populate(self):
        src, s = self.args.source_dir, self.scratch
        build = os.path.realpath(self.args.build_dir)
        for name in sorted(os.listdir(src)):
            full = os.path.join(src, name)
            if name in (".git", "samples", "build") or name.startswith("build-") or \
               os.path.realpath(full) == build:
                continue
            os.symlink(full, os.path.join(s, name))
        shutil.copytree(os.path.join(src, "samples"), os.path.join(s, "samples"))
        # build/ holds links to the build's top-level files (dlcc, libdlrt.so, train_fmnist...),
        # so that what a command writes under build/ stays in the scratch directory.
        os.mkdir(os.path.join(s, "build"))
        for name in sorted(os.listdir(build)):
            if os.path.isfile(os.path.join(build, name)):
                os.symlink(os.path.join(build, name), os.path.join(s, "build", name))
        bindir = os.path.join(s, ".doc-bin")
        os.mkdir(bindir)
        os.symlink(self.args.dlcc, os.path.join(bindir, "dlcc"))
        os.symlink(self.args.dlcc_cache, os.path.join(bindir, "dlcc-cache"))
        os.symlink("/usr/bin/python3", os.path.join(bindir, "python3"))
        with open(os.path.join(bindir, "mknpy"), "w") as f:
            f.write("#!/bin/sh\nexec /usr/bin/python3 %s mknpy \"$@\"\n" %
                    os.path.abspath(__file__))
        os.chmod(os.path.join(bindir, "mknpy"), 0o755)
        os.mkdir(os.path.join(s, ".doc-home"))
        env = dict(os.environ)
        for k in ("XDG_CACHE_HOME", "DLRT_THREADS", "DLRT_PROFILE", "DLRT_DEBUG_SPLIT",
                  "DLCC_CACHE_MAX_SIZE", "DLCC_FMNIST_LIMIT", "DLCC_FMNIST_TEST_LIMIT"):
            env.pop(k, None)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
        env["HOME"] = os.path.join(s, ".doc-home")
        env["DLCC_CACHE_DIR"] = os.path.join(s, ".doc-cache")
        env["PYTHONPATH"] = os.path.join(src, "python")
        env["DLCC_BUILD_DIR"] = build
        env["DLCC_EXE"] = self.args.dlcc
        for var, lib in (("DLCC_LIBRARY", "libdlcc.so"), ("DLRT_LIBRARY", "libdlrt.so")):
            if os.path.exists(os.path.join(build, lib)):
                env[var] = os.path.join(build, lib)
        env["LC_ALL"] = "C"
        self.env = env

    def close(self):
        if self.args.keep:
            print("scratch directory kept: %s" % self.scratch)
        else:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def fail(self, block, msg):
        self.failures.append("%s (%s block): %s" % (block.where(), block.lang or "untagged", msg))

    def sh(self, cmd, timeout):
        try:
            p = subprocess.run(["bash", "-c", cmd], cwd=self.scratch, env=self.env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=timeout)
            return p.returncode, p.stdout.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode("utf-8", "replace") if e.stdout else ""
            return None, out + "\n[timed out after %d s]" % timeout

    def setup(self, block, timeout):
        for k, v in block.directives:
            if k == "setup":
                rc, out = self.sh("set -e\n" + v, timeout)
                if rc != 0:
                    self.fail(block, "setup `%s` failed (status %s):\n%s" % (v, rc, indent(out)))
                    return False
        return True

    def run_block(self, n, block):
        lang = block.lang
        if lang not in LANGS:
            self.fail(block, "info string %r: every code block needs one of %s"
                      % (lang, ", ".join(sorted(LANGS))))
            return
        if block.has("skip"):
            self.skipped.append("%s (%s): %s" % (block.where(), lang, block.get("skip")))
            return
        timeout = int(block.get("timeout") or 60)
        if lang == "text":
            first = next((l for l in block.text.split("\n") if l.strip()), "")
            if first.startswith("$ ") or re.match(r"\s*model\s+[A-Za-z_]", first):
                self.fail(block, "a text block that shows a %s: tag it %s" %
                          (("command session", "console") if first.startswith("$")
                           else ("model", "dlg")))
            else:
                self.passed += 1
            return
        if not self.setup(block, timeout):
            return
        before = len(self.failures)
        if lang == "dlg":
            self.run_dlg(n, block, timeout)
        elif lang in ("sh", "bash", "console"):
            self.run_commands(block, timeout)
        elif lang == "c":
            self.run_c(n, block, timeout)
        elif lang == "python":
            self.run_python(n, block, timeout)
        if len(self.failures) == before:
            self.passed += 1

    def run_dlg(self, n, block, timeout):
        name = block.get("file") or "block%d.dlg" % n
        path = os.path.join(self.scratch, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(block.text + "\n")
        error = "error" in block.extra or block.has("error")
        rc, out = self.sh("dlcc check %s" % shquote(name), timeout)
        if error:
            if rc != 1:
                self.fail(block, "shown as an error, but `dlcc check` exited %s (expected 1):\n%s"
                          % (rc, indent(out)))
        elif rc != 0:
            self.fail(block, "`dlcc check` failed (status %s):\n%s" % (rc, indent(out)))

    def run_commands(self, block, timeout):
        console = block.lang == "console"
        try:
            cmds = commands_of(block.text, console)
        except ValueError as e:
            self.fail(block, str(e))
            return
        if not cmds:
            self.fail(block, "no command in the block")
            return
        want = int(block.get("exit") or 0)
        numbers_vary = block.has("numbers-vary")
        for cmd, expected in cmds:
            t0 = time.time()
            rc, out = self.sh(cmd, timeout)
            if self.args.verbose:
                print("  [%.1f s] %s" % (time.time() - t0, cmd))
            if rc != want:
                self.fail(block, "`%s` exited %s, expected %d:\n%s" % (cmd, rc, want, indent(out)))
                return
            if expected is not None and any(l.strip() for l in expected):
                if not output_matches(expected, out, numbers_vary):
                    self.fail(block, "`%s`: the output differs from the shown one.\n"
                              "  shown:\n%s\n  actual:\n%s%s" % (
                                  cmd, indent("\n".join(expected), 4), indent(out, 4),
                                  "" if numbers_vary else
                                  "\n  (numbers must match; add a `numbers-vary` directive if "
                                  "they are examples)"))
                    return

    def run_c(self, n, block, timeout):
        text = block.text
        program = re.search(r"\bint\s+main\s*\(", text) is not None
        if not program:
            text = ("#include <stdint.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
                    "#include <string.h>\n#include \"dlrt.h\"\n"
                    "int doc_fragment(void);\nint doc_fragment(void) {\n%s\n#line %d \"%s\"\n%s\n"
                    "return 0;\n}\n" % (block.get("c-declare") or "", block.line + 1,
                                         os.path.abspath(block.doc), text))
        else:
            text = '#line %d "%s"\n%s' % (block.line + 1, os.path.abspath(block.doc), text)
        path = os.path.join(self.scratch, block.get("file") or "block%d.c" % n)
        with open(path, "w") as f:
            f.write(text)
        src = self.args.source_dir
        cmd = ["gcc", "-std=c17", "-Wall", "-Wextra", "-Werror",
               "-I", os.path.join(src, "runtime"), "-I", os.path.join(src, "driver"), path]
        if program:
            # A whole program: compiled to an object (the document shows how to link it).
            cmd += ["-c", "-o", path + ".o"]
        else:
            cmd += ["-fsyntax-only", "-Wno-unused-variable", "-Wno-unused-but-set-variable"]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        if p.returncode != 0:
            self.fail(block, "does not compile:\n%s" % indent(p.stdout.decode("utf-8", "replace")))

    def run_python(self, n, block, timeout):
        try:
            ast.parse(block.text, filename=block.where())
        except SyntaxError as e:
            self.fail(block, "not valid Python: %s" % e)
            return
        if block.has("run"):
            path = os.path.join(self.scratch, "block%d.py" % n)
            with open(path, "w") as f:
                f.write(block.text + "\n")
            rc, out = self.sh("/usr/bin/python3 %s" % shquote(path), timeout)
            if rc != 0:
                self.fail(block, "failed (status %s):\n%s" % (rc, indent(out)))


def shquote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def indent(text, n=4):
    return "\n".join(" " * n + l for l in text.rstrip("\n").split("\n"))


# ------------------------------------------------------------------------------------------
# Exit statuses stated in prose


def help_exit_codes(exe, errors):
    """{code: meaning} from the 'exit status: 0 success, 1 ...' line of EXE --help."""
    p = subprocess.run([exe, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = p.stdout.decode("utf-8", "replace")
    m = re.search(r"exit status:?\s*(.*?)(?:\n\s*\n|\Z)", text, re.I | re.S)
    if not m:
        errors.append("%s --help states no exit status" % os.path.basename(exe))
        return {}
    return dict(exit_pairs(m.group(1)))


def exit_pairs(statement):
    """(code, meaning) pairs of 'exit status: 0 success, 1 invalid input (...), 3 = x' text."""
    s = re.sub(r"\((?!\s*\d)[^()]*\)", "", " ".join(statement.split()))
    out = []
    for m in re.finditer(r"(?<![\w.])(\d)\s*(?:=|:)?\s*([a-z][a-z -]*[a-z])", s):
        meaning = re.split(r"\s+(?:and|or)\s+|\s*[,;]", m.group(2))[0].strip()
        out.append((int(m.group(1)), meaning))
    return out


def check_exit_statements(doc, codes, errors):
    if not codes:
        return
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    statements = []
    for m in re.finditer(r"exit(?: status(?:es)?| codes?)?:?\s+\(?\d", prose, re.I):
        end = re.search(r"\.(?:\s|$)|\n\s*\n|\|", prose[m.start():])
        statements.append(prose[m.start():m.start() + (end.start() if end else 200)])
    listed = set()
    for st in statements:
        for code, meaning in exit_pairs(st):
            listed.add(code)
            if code not in codes:
                errors.append("%s: exit status %d ('%s') is not one `--help` states (%s)" % (
                    os.path.basename(doc), code, meaning, fmt_codes(codes)))
            elif not (meaning.startswith(codes[code]) or codes[code].startswith(meaning)):
                errors.append("%s: exit status %d is '%s' here but '%s' in `--help`" % (
                    os.path.basename(doc), code, meaning, codes[code]))
    if os.path.basename(doc) == "README.md":
        missing = sorted(set(codes) - listed)
        if missing:
            errors.append("README.md: the exit statuses leave out %s (`dlcc --help`: %s)" % (
                ", ".join("%d (%s)" % (c, codes[c]) for c in missing), fmt_codes(codes)))


# ------------------------------------------------------------------------------------------
# Paths named in prose


def check_paths(doc, source_dir, errors):
    """Relative links must point into the repository, and `dir/file` paths in backticks whose
    first component is a top-level folder of the repository must exist (globs allowed)."""
    import glob
    with open(doc, encoding="utf-8") as f:
        text = f.read()
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    prose = re.sub(r"<!--.*?-->", "", prose, flags=re.S)
    name = os.path.basename(doc)
    root = os.path.realpath(source_dir)
    for m in re.finditer(r"\]\(([^)\s]+)\)", prose):
        target = m.group(1).split("#")[0]
        if not target or re.match(r"[a-z]+:", target):
            continue
        full = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(doc)), target))
        if not full.startswith(root + os.sep) or not os.path.exists(full):
            errors.append("%s: link to %s, which %s" % (
                name, target, "is outside the repository" if not full.startswith(root + os.sep)
                else "does not exist"))
    tops = {e for e in os.listdir(source_dir)
            if os.path.isdir(os.path.join(source_dir, e)) and not e.startswith(("build", "."))}
    seen = set()
    for m in re.finditer(r"`([^`\s]+)`", prose):
        path = m.group(1)
        first = path.split("/")[0]
        if "/" not in path or first not in tops or "..." in path or path in seen:
            continue
        seen.add(path)
        pattern = re.sub(r"\[ch]\]$", "[ch]", path)  # driver/libdlcc.[ch]
        if not glob.glob(os.path.join(source_dir, pattern.rstrip("/"))):
            errors.append("%s: `%s` does not exist in the repository" % (name, path))


def fmt_codes(codes):
    return ", ".join("%d %s" % kv for kv in sorted(codes.items()))


# ------------------------------------------------------------------------------------------


def main(argv):
    if argv and argv[0] == "mknpy":
        if len(argv) not in (4, 5):
            raise SystemExit("usage: mknpy FILE DTYPE DIMS [MAX]")
        mknpy(argv[1], argv[2], argv[3], int(argv[4]) if len(argv) == 5 else 10)
        return 0
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--source-dir", required=True)
    ap.add_argument("--dlcc")
    ap.add_argument("--dlcc-cache")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--list", action="store_true", help="list the blocks, run nothing")
    ap.add_argument("--only", type=int, help="run only block N (and its document's setup)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("docs", nargs="+")
    args = ap.parse_args(argv)
    args.source_dir = os.path.abspath(args.source_dir)
    args.dlcc = os.path.abspath(args.dlcc or os.path.join(args.build_dir, "dlcc"))
    args.dlcc_cache = os.path.abspath(args.dlcc_cache or os.path.join(args.build_dir, "dlcc-cache"))
    codes = {}
    errors = []
    for exe in (args.dlcc, args.dlcc_cache):
        for k, v in help_exit_codes(exe, errors).items():
            if k in codes and codes[k] != v:
                errors.append("dlcc and dlcc-cache disagree on exit status %d: '%s' vs '%s'"
                              % (k, codes[k], v))
            codes.setdefault(k, v)
    status = 0
    for doc in args.docs:
        doc_errors = list(errors)
        blocks = parse_blocks(doc, doc_errors)
        if args.list:
            for n, b in enumerate(blocks, 1):
                print("%3d %s %s %s %s" % (n, b.where(), b.lang, " ".join(b.extra),
                                           " ".join("[%s]" % k for k, _ in b.directives)))
            continue
        check_exit_statements(doc, codes, doc_errors)
        check_paths(doc, args.source_dir, doc_errors)
        r = Runner(args, doc)
        t0 = time.time()
        try:
            for n, b in enumerate(blocks, 1):
                if args.only and n != args.only:
                    continue
                r.run_block(n, b)
        finally:
            r.close()
        print("%s: %d blocks, %d passed, %d skipped, %d failed, %d other problems (%.1f s)" % (
            os.path.relpath(doc, args.source_dir), len(blocks), r.passed, len(r.skipped),
            len(r.failures), len(doc_errors), time.time() - t0))
        for s in r.skipped:
            print("  skipped: " + s)
        for f in doc_errors + r.failures:
            print("FAIL: " + f)
        if r.failures or doc_errors:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
