"""Fusion test helper: `make_boxes` with source/family columns (unique module name, see nbtest)."""

import numpy as np


from newsbag import labels
from newsbag.contract import Boxes, PageMeta


def make_boxes(xyxy, label="text", source="a/x", family=None, score=None, width=1000, height=1000):
    """Boxes of one page from plain lists; scalars broadcast over the boxes."""
    xyxy = np.asarray(xyxy, float).reshape(-1, 4)
    n = len(xyxy)

    def col(v, dtype=object):
        return np.array(v if isinstance(v, (list, tuple)) else [v] * n, dtype=dtype)

    src = col(source)
    fam = col(family) if family is not None else np.array([s.split("/")[0] for s in src], object)
    sc = np.full(n, np.nan) if score is None else col(score, float)
    lab = np.array([labels.label_code(name) for name in col(label)], np.int8)
    return Boxes(xyxy=xyxy, score=sc, label=lab, meta=PageMeta("p", width, height),
                 data={"source": src, "family": fam, "raw_label": col(label)})


