"""Fixtures shared by every test folder."""

from pathlib import Path

import pytest

from nbtest import write_image


@pytest.fixture
def page_dir(tmp_path) -> Path:
    """Five small pages in two folders, with a name that repeats across folders."""
    root = tmp_path / "pages"
    for rel in ("issue1/p1.png", "issue1/p2.png", "issue2/p1.png", "issue2/p2.png", "issue2/p3.png"):
        write_image(root / rel, size=(40, 30))
    return root
