"""newsbag: bag document-layout detectors over newspaper pages and fuse their boxes."""

__version__ = "0.1.0"
