"""A ConfigMap volume laid out and updated the way kubelet's atomic writer does it.

kubelet never edits a mounted file in place. Each generation is written to a fresh hidden
directory `..<timestamp>`; the hidden symlink `..data` points at the current one, and every
visible top-level name is a symlink through it (`gateway.yaml -> ..data/gateway.yaml`,
`policies -> ..data/policies`). An update writes the new generation, points a temporary
symlink at it and renames that over `..data` (one atomic rename), then adds or removes
visible symlinks and deletes the old generation. A reader therefore sees either the whole old
set of files or the whole new one, and the gateway's watcher must follow the symlinks to
notice anything changed at all.
"""

from __future__ import annotations

import itertools
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

_DATA = "..data"
_DATA_TMP = "..data_tmp"


class ConfigMapVolume:
    """One mounted volume directory, updated generation by generation."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._generations = itertools.count(1)

    def write(self, files: Mapping[str, str]) -> None:
        """Publish a complete new set of files (relative path -> text) atomically."""
        generation = f"..2030_01_01_00_00_00.{next(self._generations):09d}"
        new_dir = self.root / generation
        for rel, text in files.items():
            path = new_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        old_target = os.readlink(self.root / _DATA) if (self.root / _DATA).is_symlink() else None

        tmp_link = self.root / _DATA_TMP
        tmp_link.unlink(missing_ok=True)
        tmp_link.symlink_to(generation)
        os.replace(tmp_link, self.root / _DATA)  # the atomic switch

        visible = {Path(rel).parts[0] for rel in files}
        for entry in self.root.iterdir():
            if not entry.name.startswith("..") and entry.name not in visible:
                entry.unlink()
        for name in visible:
            link = self.root / name
            if not link.is_symlink():
                link.symlink_to(f"{_DATA}/{name}")
        if old_target is not None:
            shutil.rmtree(self.root / old_target)

    def current_generation(self) -> str:
        return os.readlink(self.root / _DATA)
