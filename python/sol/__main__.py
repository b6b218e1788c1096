"""python3 -m sol profile SCRIPT [ARGS...]: runs a Python script with every Sol op recorded
(sol.profile), prints where its time went and writes sol-profile.json (Chrome trace / Perfetto)
and sol-profile.svg (roofline) in the working directory."""
import runpy
import sys

from . import profile


def main(argv):
    if len(argv) < 2 or argv[0] != "profile":
        print("usage: python3 -m sol profile SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    script = argv[1]
    sys.argv = argv[1:]
    profile(lambda: runpy.run_path(script, run_name="__main__"))
    print("wrote sol-profile.json (chrome://tracing, ui.perfetto.dev) and sol-profile.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
