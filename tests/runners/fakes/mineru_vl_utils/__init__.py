"""Fake mineru_vl_utils 2.0.7 (see mineru_client.py): the public names the runner imports."""

from .mineru_client import MinerUClient
from .structs import ContentBlock, ExtractResult

__version__ = "2.0.7"
__all__ = ["MinerUClient", "ContentBlock", "ExtractResult"]
