"""Reading the kernels' objects out of the archive users link, for the checks in this folder."""
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
