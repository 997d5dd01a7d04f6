"""What a page's transcript record says: articles marked in the page text, hyphens joined and recorded, confidences."""

from newsbag.transcription.stage import _transcript


def _piece(region, article, is_title, rank):
    return {"region": region, "bbox_xyxy": [0, 10 * rank, 100, 10 * rank + 10],
            "class": "title" if is_title else "text", "order": rank, "article": article, "is_title": is_title,
            "rank": rank, "blocks": []}


def _line(order, text, score, **extra):
    return {"bbox_xyxy": [0, order, 100, order + 1], "text": text, "score": score, "order": order, **extra}


def test_articles_are_blocks_headline_first_and_broken_words_are_whole():
    # two articles, each a headline and a body region; the first body breaks "Zeitung" at a line end
    plan = {"page_id": "p", "image": {"path": "p.png", "width": 100, "height": 100}, "fingerprint": "f",
            "pieces": [_piece(0, 0, True, 0), _piece(1, 0, False, 1), _piece(2, 1, True, 2), _piece(3, 1, False, 3)],
            "region_of": [0, 1, 1, 1, 2, 3]}
    words = [{"bbox_xyxy": [0, 1, 40, 2], "text": "Die", "score": 0.9}, {"bbox_xyxy": [45, 1, 99, 2], "text": "Zei¬",
                                                                          "score": 0.5}]
    lines = [_line(0, "Sturm", 0.9), _line(1, "Die Zei¬", 0.7, words=words, model="Fraktur"),
             _line(2, "tung ist", 0.8), _line(3, "da.", 0.6), _line(4, "Bern", 0.9), _line(5, "Ruhig.", 0.9)]
    record = _transcript(plan, lines, "C")
    # the .txt: one block per article, a blank line apart, its headline first, a paragraph per region
    assert record["text"] == "Sturm\nDie Zeitung ist da.\n\nBern\nRuhig."
    assert [(a["headline"], a["text"]) for a in record["articles"]] == [("Sturm", "Sturm\nDie Zeitung ist da."),
                                                                       ("Bern", "Bern\nRuhig.")]
    body = record["regions"][1]
    assert body["text"] == "Die Zeitung\nist\nda."
    # the lines as read, with how the hyphen was joined, their confidence, words and model
    assert [(ln["text"], ln.get("hyphen"), ln["score"]) for ln in body["lines"]] == [
        ("Die Zei¬", "dropped", 0.7), ("tung ist", None, 0.8), ("da.", None, 0.6)]
    assert body["lines"][0]["words"] == words and body["lines"][0]["model"] == "Fraktur"
    assert record["models"] == ["Fraktur"]
