"""python3 -m ddpio ...: the ddpio program (convert, inspect, bench, train, launch, ...).

Runs, in this order: $DDPIO_PROGRAM; the program installed with this package (bin/ddpio inside
the package, from the wheel of `pip install .`; else bin/ddpio in the prefix it was installed
into); `ddpio` on PATH. Arguments, exit code and signals are the program's own (this process
becomes it)."""
import os
import shutil
import sys


def find_program():
    explicit = os.environ.get("DDPIO_PROGRAM")
    if explicit:
        return explicit
    here = os.path.dirname(os.path.abspath(__file__))
    # <package>/bin/ddpio (the wheel of `pip install .`: setup.py puts the program inside the
    # package, wherever pip installs it); <prefix>/lib/python3.X/dist-packages/ddpio ->
    # <prefix>/bin/ddpio (cmake --install, the .deb); <build>/python/ddpio -> <build>/tools/ddpio
    # (the build tree, PYTHONPATH=<build>/python).
    for up in ("bin/ddpio", "../../../../bin/ddpio", "../../tools/ddpio"):
        candidate = os.path.normpath(os.path.join(here, up))
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    return shutil.which("ddpio")


def main():
    program = find_program()
    if program is None:
        sys.stderr.write("ddpio: the ddpio program is not installed next to this package nor on PATH "
                         "(set DDPIO_PROGRAM to its path)\n")
        return 1
    try:
        os.execv(program, [program] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write(f"ddpio: cannot run {program}: {e.strerror}\n")
        return 1


if __name__ == "__main__":
    sys.exit(main())
