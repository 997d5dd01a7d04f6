"""The planner's face of a stage, pure: a done page carried stale by an input redone first, what counts
as work, and why a page is stale as its stage's record of it says."""

from newsbag import revisions
from newsbag.stage_protocol import Made, Outputs, carried, has_work, input_changes, redone, stale_reason


def _outputs(**kw) -> Outputs:
    return Outputs("boards", done=3, stale=0, failed=0, pending=0, inputs=("source:a/v", "fusion:U"),
                   done_pages=frozenset({"p1", "p2", "p3"}), **kw)


def test_a_done_page_an_input_redoes_first_counts_stale_by_the_first_such_input():
    after = carried(_outputs(), {"source:a/v": {"p1"}, "fusion:U": {"p1", "p2"}})
    assert (after.done, after.stale, after.done_pages) == (1, 2, frozenset({"p3"}))
    assert after.reasons == {"its input a/v is redone first": 1, "its input fusion/U is redone first": 1}
    assert redone(after, ["p1", "p2", "p3"]) == {"p1", "p2"}
    assert carried(_outputs(), {"source:b/w": {"p1"}}) == _outputs()


def test_work_is_a_page_not_done_a_run_level_output_or_an_input_record_to_write_again():
    assert not has_work([_outputs()], 3)
    assert has_work([_outputs()], 4) and has_work([], 3)
    assert has_work([_outputs(whole=False)], 3) and has_work([_outputs(rerecord=1)], 3)
    # a source's pages held failed are no work: a run computes only its todo pages
    held = Outputs("a/v", done=2, stale=0, failed=1, pending=0, done_pages=frozenset({"p1", "p2"}),
                   todo_pages=frozenset())
    assert redone(held, ["p1", "p2", "p3"]) == set()


def test_a_stale_page_says_which_input_changed_went_or_came():
    then = {"a/v": [10, 1], "a/w": [20, 2], "b/x": [30, 3]}
    now = {"a/v": [10, 5], "a/w": [20, 2], "c/y": [40, 4]}
    assert input_changes(then, now) == "its input a/v changed; its input b/x is gone; its input c/y is new"
    assert input_changes(then, {**then, "a/v": [11, 1], "a/w": [21, 2]}) == "its inputs a/v, a/w changed"
    assert input_changes(then, then) is None
    assert input_changes({"source:a/v": 1}, {}, lambda key: key.split(":")[1].upper()) == "its input A/V is gone"


def test_the_reason_is_the_code_revision_then_the_inputs_then_the_options_then_the_files():
    now = revisions.revision("review")
    made = Made("f1", {"a/v": [1, 1]}, {"review": now})
    assert stale_reason(made, "f1", {"a/v": [1, 1]}) == "its files are missing or cut short"
    assert stale_reason(made, "f2", {"a/v": [1, 1]}) == "its options changed"
    assert stale_reason(made, "f2", {"a/v": [1, 2]}) == "its input a/v changed"
    older = Made("f1", {"a/v": [1, 1]}, {"review": now - 1})
    assert stale_reason(older, "f2", {"a/v": [1, 2]}) == f"made by review code revision {now - 1}, now {now}"


def test_a_status_row_holds_the_counts_for_show_and_a_copy_of_the_reasons():
    outputs = Outputs("U", 2, 1, 0, 0, {"its options changed": 1}, note="recommended", whole=False,
                      inputs=("source:fake/v",), done_pages=frozenset({"a", "b"}), todo_pages=frozenset({"c"}),
                      rerecord=1)
    row = outputs.row()
    assert row == {"name": "U", "done": 2, "stale": 1, "failed": 0, "pending": 0,
                   "reasons": {"its options changed": 1}, "note": "recommended", "whole": False}
    row["reasons"]["its options changed"] += 1
    assert outputs.reasons == {"its options changed": 1}
