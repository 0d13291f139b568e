"""Reading the kernels' objects out of the archive users link, for the checks in this folder."""
import argparse
import re
import subprocess
import tempfile
from pathlib import Path

FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")


def disassemble_members(library, name_part, ar="ar", objdump="objdump"):
    """Yields (member, objdump -d -r listing) for each object of `library` whose name holds
    `name_part` (a target feature, such as "sapphirerapids")."""
    members = subprocess.run([ar, "t", library], check=True, capture_output=True,
                             text=True).stdout.split()
    chosen = [m for m in members if name_part in m and m.endswith(".o")]
    if not chosen:
        return
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run([ar, "x", str(Path(library).resolve())] + chosen, cwd=scratch, check=True)
        for member in chosen:
            yield member, subprocess.run([objdump, "-d", "-r", "--no-show-raw-insn",
                                          str(Path(scratch) / member)],
                                         check=True, capture_output=True, text=True).stdout


def functions(disassembly):
    """Yields (name, lines) per function of an objdump -d -r listing."""
    name, lines = None, []
    for line in disassembly.splitlines():
        match = FUNCTION.match(line)
        if match:
            if name is not None:
                yield name, lines
            name, lines = match.group(1), []
        elif name is not None:
            lines.append(line)
    if name is not None:
        yield name, lines


def library_arguments(doc):
    """The checks' command line: LIBRARY.a [--ar PATH] [--objdump PATH]."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("library")
    parser.add_argument("--ar", default="ar")
    parser.add_argument("--objdump", default="objdump")
    return parser.parse_args()


def report(failures, summary, vacuous=None):
    """Prints each failure and the summary; the exit status. `vacuous`, where given, says why
    the check found nothing to check, which fails it."""
    if vacuous:
        print("FAIL:", vacuous)
        return 1
    for failure in failures:
        print("FAIL:", failure)
    print(summary)
    return 1 if failures else 0


def archive_functions(args, name_part):
    """Yields (member, function name, lines) over the objects that disassemble_members picks,
    for a check's parsed library_arguments."""
    for member, listing in disassemble_members(args.library, name_part, args.ar, args.objdump):
        for name, lines in functions(listing):
            yield member, name, lines
