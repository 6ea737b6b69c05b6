"""Execute a notebook (nbformat JSON on stdin, the executed notebook on stdout) with the project's
nbclient client, whose shell replies survive ``Output`` widgets (``pr1lib.notebook.runner``).

    python tests/_nbrun.py < in.ipynb > out.ipynb
"""

from __future__ import annotations

import sys

import nbformat

from pr1lib.notebook.runner import notebook_client

if __name__ == "__main__":
    nb = nbformat.reads(sys.stdin.read(), as_version=4)
    notebook_client(nb, timeout=300, kernel_name="python3").execute()
    sys.stdout.write(nbformat.writes(nb))
