"""What the gallery reads of other stages' tables: by header name, whatever their column order."""

from __future__ import annotations

from newsbag.review.reading import layout_scores, leaderboard


def test_a_leaderboard_opens_with_rank_name_recommended_score_whatever_the_file_s_order(tmp_path):
    """The gallery read leaderboards from summary.json in its own order; the TSVs are being
    reordered (rank, name, recommended, score first): read by header name, numbers typed."""
    path = tmp_path / "variant_leaderboard.tsv"
    path.write_text("name\tline_coverage\tscore\tmethod\trank\trecommended\n"
                    "paragraphs\t0.9\t0.864\tparagraphs\t1\tpinned\n"
                    "vote\t\t0.72\tconsensus\t2\t\n")
    board = leaderboard(path)
    assert board["columns"] == ["rank", "name", "recommended", "score", "line_coverage", "method"]
    assert board["rows"] == [[1, "paragraphs", "pinned", 0.864, 0.9, "paragraphs"], [2, "vote", None, 0.72, None, "consensus"]]
    assert leaderboard(tmp_path / "absent.tsv") == {"columns": [], "rows": []}


def test_layout_scores_per_page_for_variants_then_sources_by_header_name(tmp_path):
    fusion = tmp_path / "outputs" / "fusion"
    fusion.mkdir(parents=True)
    (fusion / "per_page_variant_metrics.tsv").write_text("score\tname\tpage_id\n0.5\tv1\tp1\n0.7\tv1\tp2\nnan\tv2\tp1\n")
    (fusion / "per_page_source_metrics.tsv").write_text("page_id\tname\tscore\np1\ta/x\t0.25\np9\ta/x\t0.1\n")
    names, scores = layout_scores(tmp_path, {"p1", "p2"})
    assert names == [{"name": "v1", "kind": "variant"}, {"name": "v2", "kind": "variant"},
                     {"name": "a/x", "kind": "source"}]
    assert scores == {"p1": [0.5, None, 0.25], "p2": [0.7, None, None]}   # p9 not asked for
