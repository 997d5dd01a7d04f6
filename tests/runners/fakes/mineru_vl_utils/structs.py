"""ContentBlock / ExtractResult as in mineru-vl-utils 2.0.7 structs.py (dict / list subclasses, assert-validated)."""

BLOCK_TYPES = {
    "text", "title", "doc_title", "paragraph_title", "table", "equation", "formula_number", "code",
    "algorithm", "aside_text", "ref_text", "index", "phonetic", "list_item", "caption", "table_caption",
    "image_caption", "code_caption", "footnote", "table_footnote", "image_footnote", "header", "footer",
    "page_number", "page_footnote", "image", "chart", "list", "image_block", "equation_block", "unknown",
}
ANGLES = {None, 0, 90, 180, 270}


class ContentBlock(dict):
    def __init__(self, type, bbox, angle=None, content=None, merge_prev=False):
        assert type in BLOCK_TYPES, f"Unknown type: {type}"
        assert isinstance(bbox, list) and len(bbox) == 4, "Bounding box must be a list of four coordinates"
        assert all(0.0 <= v <= 1.0 for v in bbox), "Bounding box coordinates must be in the range [0, 1]"
        assert bbox[0] < bbox[2], "Bounding box x1 must be less than x2"
        assert bbox[1] < bbox[3], "Bounding box y1 must be less than y2"
        assert angle in ANGLES, f"Invalid angle: {angle}. Must be one of {ANGLES}"
        assert not merge_prev or type == "text", "merge_prev can only be set for text blocks"
        super().__init__(type=type, bbox=bbox, angle=angle, content=content)
        if type == "text":
            self["merge_prev"] = merge_prev

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(name) from exc


class ExtractResult(list):
    def __init__(self, blocks=(), layout_scored=None):
        super().__init__(blocks)
        self.layout_scored = layout_scored
