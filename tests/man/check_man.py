#!/usr/bin/env python3
"""tests/man/check_man.py — the manual pages cannot drift from the programs' own help.

For dlcc(1) and dlcc-cache(1) (man/*.1, man(7) source) against the built programs' help:
- every command that `PROG --help` lists has a subsection `.SS "PROG COMMAND"`, and every option
  (`--long` or `-x`) that `PROG COMMAND --help` prints appears in that subsection;
- every option that help describes (one starting a line of its option list) has a paragraph
  of its own (a `.TP` tag) there, and every option a subsection describes is one that
  command's help prints (no option documented that the program does not take, or under the
  wrong command);
- the program's own options (`PROG --help`) are in OPTIONS, and every OPTIONS tag is there;
- every environment variable any help mentions ($DLCC_*, $DLRT_*, $XDG_*) is in ENVIRONMENT;
- every exit status `PROG --help` lists is a tag of EXIT STATUS, and no other;
- the version in `.TH` is the program's (`PROG --version`);
- the model in dlcc-graph(5)'s EXAMPLES passes `dlcc check`, and its `.TH` names the version.
Prints one "ok"/"FAIL" line per check and "N passed, N failed"; exits 1 on any failure.
usage: check_man.py MAN_DIR DLCC DLCC_CACHE
"""
import re
import subprocess
import sys

LONG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
SHORT = re.compile(r"(?<![\w/-])-[A-Za-z](?![\w-])")
ENV = re.compile(r"\b(?:DLCC|DLRT|XDG)_[A-Z0-9_]+")

passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   " + name)
    else:
        failed += 1
        print("FAIL " + name + (": " + detail if detail else ""))


def run(*argv):
    r = subprocess.run(argv, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"{' '.join(argv)} exited {r.returncode}: {r.stderr}")
    return r.stdout


def options(text):
    return set(LONG.findall(text)) | set(SHORT.findall(text))


def described(text):
    """The options a help text describes: those that start one of its option lines."""
    found = set()
    for line in text.split("\n"):
        m = re.match(r"  (-[A-Za-z], )?(--?[A-Za-z][\w-]*)", line)
        if m:
            found |= options(m.group(0))
    return found


def plain(line):
    """A man(7) source line as the words it prints: escapes and quotes removed."""
    line = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", line)  # font changes
    line = line.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\").replace("\\c", "")
    line = line.replace("\\(dq", '"').replace("\\~", " ")
    line = re.sub(r"\\\(..", " ", line)  # other special characters
    if line.startswith("."):  # a macro: drop its name, keep its arguments
        line = line.split(None, 1)[1] if " " in line else ""
        line = line.replace('"', "")
    return line


def parse_man(path):
    """{'.TH': args, 'SECTION': {'text': str, 'tags': [str], 'subs': {title: same}}}"""
    lines = open(path, encoding="utf-8").read().split("\n")
    page = {"sections": {}}
    sec = sub = None
    tag_next = False
    for raw in lines:
        if raw.startswith('.\\"'):
            continue
        if raw.startswith(".TH "):
            page["th"] = raw
            continue
        if raw.startswith(".SH "):
            title = plain(raw).strip()
            sec = page["sections"].setdefault(title, {"text": "", "tags": [], "subs": {}})
            sub = None
            continue
        if raw.startswith(".SS "):
            title = plain(raw).strip()
            sub = sec["subs"].setdefault(title, {"text": "", "tags": []})
            continue
        where = sub if sub is not None else sec
        if where is None:
            continue
        text = plain(raw)
        where["text"] += text + "\n"
        if tag_next:
            where["tags"].append(text)
            tag_next = False
        if raw.startswith(".TP"):
            tag_next = True
    return page


def help_sections(text):
    """The command names listed under 'commands:' of a main help."""
    cmds, on = [], False
    for line in text.split("\n"):
        if line.startswith("commands:"):
            on = True
        elif on and not line.strip():
            break
        elif on:
            cmds.append(line.split()[0])
    return [c for c in cmds if c != "help"]


def main_options(text):
    m = re.search(r"\noptions:\n(.*?)(\n\n|$)", text, re.S)
    return options(m.group(1)) if m else set()


def check_program(man_dir, prog_name, prog):
    page = parse_man(f"{man_dir}/{prog_name}.1")
    secs = page["sections"]
    main = run(prog, "--help")
    version = run(prog, "--version").split()[1]
    check(f"{prog_name}.1: .TH names version {version}", f'"dlcc {version}"' in page.get("th", ""),
          page.get("th", "no .TH"))
    for s in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXIT STATUS",
              "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"):
        check(f"{prog_name}.1: has section {s}", s in secs)
    if "COMMANDS" not in secs or "OPTIONS" not in secs:
        return
    all_help = main
    opts = main_options(main)
    check(f"{prog_name}.1: OPTIONS has {sorted(opts)}", opts <= options(secs["OPTIONS"]["text"]),
          f"missing {sorted(opts - options(secs['OPTIONS']['text']))}")
    tagged = set().union(*[options(t) for t in secs["OPTIONS"]["tags"]] or [set()])
    check(f"{prog_name}.1: OPTIONS describes each option as '{prog_name} --help' does, and no "
          "other", tagged == opts, f"help {sorted(opts)}, page {sorted(tagged)}")
    subs = secs["COMMANDS"]["subs"]
    cmds = help_sections(main)
    check(f"{prog_name}.1: '{prog_name} --help' lists commands", len(cmds) >= 5, str(cmds))
    for cmd in cmds:
        title = f"{prog_name} {cmd}"
        h = run(prog, cmd, "--help")
        all_help += h
        if title not in subs:
            check(f"{prog_name}.1: a subsection '{title}'", False, f"have {sorted(subs)}")
            continue
        want, doc = options(h), subs[title]
        have = options(doc["text"])
        check(f"{prog_name}.1: '{title}' has the {len(want)} options of its --help",
              want <= have, f"missing {sorted(want - have)}")
        tagged = set().union(*[options(t) for t in doc["tags"]] or [set()])
        check(f"{prog_name}.1: every option '{title}' describes is one it takes",
              tagged <= want, f"not in '{prog_name} {cmd} --help': {sorted(tagged - want)}")
        desc = described(h)
        check(f"{prog_name}.1: '{title}' describes (.TP) each of the {len(desc)} options its "
              "--help describes", desc <= tagged, f"not described: {sorted(desc - tagged)}")
    extra = set(subs) - {f"{prog_name} {c}" for c in cmds} - {f"{prog_name} help"}
    check(f"{prog_name}.1: no subsection for a command the program lacks", not extra,
          str(sorted(extra)))
    env = set(ENV.findall(all_help))
    have_env = set(ENV.findall(secs.get("ENVIRONMENT", {"text": ""})["text"]))
    check(f"{prog_name}.1: ENVIRONMENT has {sorted(env)}", env <= have_env,
          f"missing {sorted(env - have_env)}")
    m = re.search(r"\nexit status: (.*)", main)
    codes = set(re.findall(r"\b\d+\b", m.group(1))) if m else set()
    tags = {t.split()[0] for t in secs.get("EXIT STATUS", {"tags": []})["tags"] if t.split()}
    check(f"{prog_name}.1: EXIT STATUS lists exactly {sorted(codes, key=int)}",
          bool(codes) and codes == tags, f"help {sorted(codes)}, page {sorted(tags)}")


def check_graph_page(man_dir, dlcc):
    import os
    import tempfile
    src = open(f"{man_dir}/dlcc-graph.5", encoding="utf-8").read()
    version = run(dlcc, "--version").split()[1]
    th = next((l for l in src.split("\n") if l.startswith(".TH ")), "")
    check(f"dlcc-graph.5: .TH names version {version}", f'"dlcc {version}"' in th, th)
    m = re.search(r"\n\.EX\n(.*?)\n\.EE\n", src, re.S)
    check("dlcc-graph.5: has an example model", m is not None)
    if not m:
        return
    text = m.group(1).replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "example.dlg")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        r = subprocess.run([dlcc, "check", "-v", path], capture_output=True, text=True,
                           check=False)
        check("dlcc-graph.5: its example model passes 'dlcc check' (with a train block)",
              r.returncode == 0 and "train loss {" in text, r.stderr + r.stdout)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: check_man.py MAN_DIR DLCC DLCC_CACHE")
    man_dir, dlcc, dlcc_cache = sys.argv[1:]
    check_program(man_dir, "dlcc", dlcc)
    check_program(man_dir, "dlcc-cache", dlcc_cache)
    check_graph_page(man_dir, dlcc)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


main()
