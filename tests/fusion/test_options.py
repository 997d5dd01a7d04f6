import pytest

from newsbag.fusion.options import (DEFAULT_FUSION_CFG, RECIPE_DOC, ConsensusParams, Variant, match_sources, needs_order,
                                     parse_fusion_config, with_order)


def test_default_config_ships_the_operators_variants_exactly_and_the_recipes():
    cfg = parse_fusion_config(DEFAULT_FUSION_CFG)
    by_name = {v.name: v for v in cfg.variants}
    assert set(by_name) == {"S1", "S2", "S3", "P1", "P2", "P3", "P4", "best_single", "union", "vote", "ranked",
                           "paragraphs"}
    paddle = ("paddle_layout/*", "paddle_vl15/*")   # the four Paddle sources (docs/design.md, Labels)
    assert by_name["S1"].sources == paddle and by_name["S1"].method == "best_single"
    assert by_name["S2"].sources == ("dell/*",) and by_name["S3"].sources == ("mineru/*",)
    assert by_name["P1"].sources == paddle
    assert by_name["P2"].sources == paddle + ("dell/*",)
    assert by_name["P3"].sources == paddle + ("mineru/*",)          # Paddle + MinerU, no Dell
    assert by_name["P4"].sources == paddle + ("dell/*", "mineru/*")
    assert all(by_name[n].params.vote == 1 for n in ("P1", "P2", "P3", "P4"))
    assert cfg.recommended == "paragraphs" and cfg.line_source == "text_lines/lines"
    assert set(RECIPE_DOC) == set(by_name)                          # one line each


def test_embedded_config_ships_the_recipes_as_defined():
    import json
    from pathlib import Path

    from newsbag.fusion.options import RECIPES

    cfg = json.loads((Path(__file__).resolve().parents[2] / "configs" / "pipeline.local.json").read_text())
    fusion = [s for s in cfg["stages"] if s.get("kind") == "fusion"][0]
    assert fusion["variants"] == json.loads(json.dumps(RECIPES)) and fusion["recommended"] == "paragraphs"


@pytest.mark.parametrize("cfg, message", [
    ({"variantz": {}}, "unknown key 'variantz'; did you mean 'variants'?"),
    ({"variants": {"A": {"sources": ["*"], "method": "vote"}}}, "method must be one of"),
    ({"variants": {"A": {"sources": ["*"], "method": "consensus", "params": {"vot": 2}}}},
     "fusion.variants.A.params: unknown key 'vot'; did you mean 'vote'? (known: col_gap, col_min_lines"),
    ({"variants": {"A": {"sources": "*", "method": "consensus"}}}, "sources must be a list of strings"),
    ({"variants": {"A": {"sources": ["*"], "method": "consensus", "params": {"t_iou": 2}}}}, "t_iou must be a number in [0, 1], got 2"),
    ({"variants": {"A": {"sources": ["*"], "method": "consensus", "params": {"vote": 0}}}}, "vote must be a whole number >= 1, got 0"),
    ({"variants": {"A": {"sources": ["*"], "method": "best_single", "params": {"vote": 1}}}},
     "unknown key 'vote' (known: none)"),
    ({"variants": {}, "recommended": "X"}, "fusion.recommended 'X' is not a variant"),
    ({"variants": {"a/b": {"sources": ["*"], "method": "consensus"}}}, "plain folder names"),
    ({"variants": {"A": {"sources": ["*"], "method": "consensus", "params": {"solo_min_size": 3}}}},
     "solo_min_size must be a [first, second] pair of numbers >= 0 (text-line heights), or null, got 3"),
    ({"variants": {"A": {"sources": ["*"], "method": "consensus", "params": {"prefer": "best"}}}},
     "prefer must be one of support, fine, coarse, rank, got 'best'"),
])
def test_bad_config_is_one_line_value_error(cfg, message):
    with pytest.raises(ValueError) as err:
        parse_fusion_config(cfg)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_params_are_frozen_and_parsed():
    cfg = parse_fusion_config({"variants": {"C": {"sources": ["*"], "method": "consensus", "params": {
        "vote": 3, "granularity": ["a/*"], "weights": {"b/*": 2}, "split_columns": True}}}})
    p = cfg.variants[0].params
    assert p == ConsensusParams(vote=3, granularity=("a/*",), weights=(("b/*", 2.0),), split_columns=True)
    ranked = {v.name: v for v in parse_fusion_config(DEFAULT_FUSION_CFG).variants}["ranked"].params
    assert (ranked.prefer, ranked.solo_min_size, ranked.t_shadow, ranked.granularity, ranked.max_page_share) == (
        "rank", (3.0, 1.0), 0.3, ("auto",), 0.5)


def test_auto_granularity_is_resolved_to_an_order():
    cfg = parse_fusion_config({"variants": {
        "A": {"sources": ["*"], "method": "consensus", "params": {"granularity": "auto"}},
        "B": {"sources": ["*"], "method": "consensus", "params": {"granularity": ["x/*"]}},
        "S": {"sources": ["*"], "method": "best_single"}}})
    assert needs_order(cfg)
    resolved = with_order(cfg, ["b/y", "a/x"])
    assert [getattr(v.params, "granularity", None) for v in resolved.variants] == [("b/y", "a/x"), ("x/*",), None]
    assert not needs_order(resolved)


@pytest.mark.parametrize("patterns, available, exclude, expected", [
    (["paddle_layout/*"], ["paddle_layout/cdla", "tesseract/blocks"], [], (["paddle_layout/cdla"], None)),
    (["paddle_layout/*", "dell/*"], ["paddle_layout/cdla"], [], ([], "no source matching 'dell/*' ran")),
    (["*"], ["text_lines/lines", "tesseract/blocks"], ["text_lines/lines"], (["tesseract/blocks"], None)),
    (["*"], ["text_lines/lines"], ["text_lines/lines"], ([], "no source matching '*' ran")),
])
def test_match_sources(patterns, available, exclude, expected):
    assert match_sources(Variant("V", tuple(patterns), "consensus"), available, tuple(exclude)) == expected


def test_missing_keys_take_the_defaults():
    assert parse_fusion_config({}) == parse_fusion_config(DEFAULT_FUSION_CFG)
    assert parse_fusion_config({"variants": {}}).variants == ()


def test_a_fusion_stage_may_say_what_it_is_for_as_every_stage_may():
    """Every stage entry may carry a "description"; the fusion stage's was refused as an unknown key."""
    from newsbag.config import parse_config
    from newsbag.config_fields import STAGE_KEYS

    assert parse_fusion_config({"description": "why", "variants": {}}) == parse_fusion_config({"variants": {}})
    assert "description" in STAGE_KEYS
    config = parse_config({"stages": [{"name": "fusion", "kind": "fusion", "description": "why"}]})
    assert config.stage("fusion").options["description"] == "why"


@pytest.mark.parametrize("cfg, message", [
    ({"variants": {"A": {"sources": ["*"]}}}, "fusion.variants.A: method is missing: it must be one of consensus, "
                                              "best_single, paragraphs"),
    ({"variants": {"A": {"method": "consensus"}}}, "fusion.variants.A: sources is missing"),
    ({"variants": {"A": {"sources": [], "method": "consensus"}}},
     "fusion.variants.A: sources must be a list of strings (at least 1), got []"),
    ({"variants": {"A": {"sources": ["*"], "method": "consensus", "parms": {}}}},
     "fusion.variants.A: unknown key 'parms'; did you mean 'params'? (known: method, params, sources)"),
    ({"exclude_from_variants": "x/*"}, "fusion: exclude_from_variants must be a list of strings, got 'x/*'"),
    ({"variants": None}, "fusion: variants must be an object, got None"),
])
def test_the_section_and_each_variant_are_checked_by_their_declarations(cfg, message):
    with pytest.raises(ValueError) as err:
        parse_fusion_config(cfg)
    assert str(err.value).startswith(message)
