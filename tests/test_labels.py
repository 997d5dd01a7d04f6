import pytest

from newsbag import labels
from newsbag.tool_spec import label_table

# Label sets read from the models' metadata and code (docs/design.md, Labels).
PP_V2V3 = ["abstract", "algorithm", "aside_text", "chart", "content", "display_formula", "doc_title",
           "figure_title", "footer", "footer_image", "footnote", "formula_number", "header", "header_image",
           "image", "inline_formula", "number", "paragraph_title", "reference", "reference_content", "seal",
           "table", "text", "vertical_text", "vision_footnote"]
PP_PLUS_L = ["paragraph_title", "image", "text", "number", "abstract", "content", "figure_title", "formula",
             "table", "reference", "doc_title", "footnote", "header", "algorithm", "footer", "seal", "chart",
             "formula_number", "aside_text", "reference_content"]
DELL = ["article", "author", "cartoon_or_advertisement", "headline", "image_caption", "masthead",
        "newspaper_header", "page_number", "photograph", "table"]
MINERU = ["text", "title", "doc_title", "paragraph_title", "table", "equation", "formula_number", "code",
          "algorithm", "aside_text", "ref_text", "index", "phonetic", "list_item", "caption", "table_caption",
          "image_caption", "code_caption", "footnote", "table_footnote", "image_footnote", "header", "footer",
          "page_number", "page_footnote", "image", "chart", "list", "image_block", "equation_block", "unknown"]
CDLA = ["text", "title", "figure", "figure_caption", "table", "table_caption", "header", "footer",
        "reference", "equation"]
TESSERACT = ["flowing_text", "heading_text", "pullout_text", "caption_text", "vertical_text", "table",
             "flowing_image", "heading_image", "pullout_image", "horz_line", "vert_line", "noise", "paragraph"]


@pytest.mark.parametrize("family, raw_labels", [
    ("paddle_layout", PP_V2V3 + PP_PLUS_L + CDLA), ("paddle_vl15", PP_V2V3), ("dell", DELL),
    ("mineru", MINERU), ("tesseract", TESSERACT), ("text_lines", ["text_line", "text_block"]),
])
def test_every_model_label_has_an_explicit_entry(family, raw_labels):
    table = label_table(family)  # declared in runners/<family>.tool.json
    missing = [r for r in raw_labels if r not in table]
    assert missing == []
    assert all(table[r] in labels.CANONICAL for r in raw_labels)


@pytest.mark.parametrize("family, raw, canonical, coarse", [
    ("dell", "article", "text", "text"),                      # article body
    ("dell", "headline", "headline", "title"),
    ("dell", "cartoon_or_advertisement", "advertisement", "image"),
    ("paddle_layout", "paragraph_title", "title", "title"),
    ("paddle_layout", "figure", "image", "image"),            # CDLA
    ("paddle_layout", "number", "page_number", "other"),
    ("mineru", "list_item", "text", "text"),
    ("mineru", "image_caption", "caption", "text"),
    ("tesseract", "heading_text", "headline", "title"),
    ("tesseract", "horz_line", "separator", "other"),
    ("text_lines", "text_line", "text_line", "line"),         # evidence, not a region
    ("dell", "paragraph", "unknown", "other"),                # not in Dell's table: never silently text
])
def test_label_mapping(family, raw, canonical, coarse):
    assert label_table(family).get(raw, "unknown") == canonical
    assert labels.coarse_for(canonical) == coarse


def test_label_codes_fit_int8_and_round_trip():
    assert len(labels.LABELS) < 128
    assert all(labels.LABELS[labels.label_code(name)] == name for name in labels.LABELS)
    assert labels.LABELS[labels.label_code("no such label")] == "unknown"


def test_coarse_codes_index_the_coarse_classes():
    import numpy as np

    names = ["text", "headline", "advertisement", "table", "separator", "text_line"]
    codes = labels.coarse_codes(np.array([labels.label_code(n) for n in names], np.int8))
    assert [labels.COARSE_CLASSES[c] for c in codes] == ["text", "title", "image", "table", "other", "line"]
    assert [labels.COARSE[labels.coarse_for(n)] for n in names] == codes.tolist()
    assert labels.coarse_codes(np.zeros(0, np.int8)).shape == (0,)   # empty
