"""TLS key log files (`--keylog FILE`, `SSLKEYLOGFILE`): their text, read as they grow.

Only the reading is here (capture/ is the layer that touches files); parsing is
`codec.tls.KeyLog`'s. A client writing its key log while a live capture runs appends to the
file, so `read_new()` returns what was added since the last call, and nothing when the file has
not grown (one `stat` per call).
"""

from __future__ import annotations

import os


class KeyLogFiles:
    """Key log files, each read from where the last read stopped."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.offsets = dict.fromkeys(paths, 0)

    def read_new(self) -> list[str]:
        out = []
        for path in self.paths:
            try:
                size = os.stat(path).st_size
                if size <= self.offsets[path]:
                    continue
                with open(path, "rb") as f:
                    f.seek(self.offsets[path])
                    data = f.read(size - self.offsets[path])
            except OSError:
                continue  # SSLKEYLOGFILE may name a file no client has written yet
            end = data.rfind(b"\n") + 1  # a line still being written is read next time
            if end:
                self.offsets[path] += end
                out.append(data[:end].decode("ascii", errors="replace"))
        return out
