"""store: what the project keeps on disk, read and written safely. The bottom wing.

It owns where things live (``paths``), run folders and their lock (``folders``), the result cards
behind every quoted number (``cards``), the interruption-safe JSON Lines store (``jsonl``), model
folders read without torch (``modelfiles``), a full disk as one line (``disk``), the library
versions every card records (``versions``) and where the repository is published (``publish``).

May import: nothing outside this package.
"""

__all__ = ["cards", "disk", "folders", "jsonl", "modelfiles", "paths", "publish", "versions"]
