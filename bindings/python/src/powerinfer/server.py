"""`python -m powerinfer.server ARGS`: runs the installed pi-server with ARGS (the same flags,
docs/server.md). The server is the C++ program; this module only finds it: $PI_SERVER, else
`pi-server` on PATH, else next to this interpreter."""
import os
import shutil
import sys


def find_server():
    """The pi-server executable, or None."""
    named = os.environ.get("PI_SERVER")
    if named:
        return named if os.path.isfile(named) and os.access(named, os.X_OK) else None
    on_path = shutil.which("pi-server")
    if on_path:
        return on_path
    beside = os.path.join(os.path.dirname(sys.executable), "pi-server")
    return beside if os.path.isfile(beside) and os.access(beside, os.X_OK) else None


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    server = find_server()
    if server is None:
        where = ("PI_SERVER=" + os.environ["PI_SERVER"] + " is not an executable"
                 if os.environ.get("PI_SERVER") else "pi-server is not on PATH")
        print("python -m powerinfer.server: " + where + "; install libpowerinfer's tools "
              "(cmake --install BUILD) or set PI_SERVER to the pi-server binary",
              file=sys.stderr)
        return 2
    os.execv(server, [server] + args)


if __name__ == "__main__":
    sys.exit(main())
