"""The run lock belongs to the file, not to the path that names it: a second run through a symlink
(or a path with ``..``) to a file being written is refused, as through the same path."""

from __future__ import annotations

import pytest

from kgqa_lib.evaluate.runner import RunLocked, _RunLock


@pytest.mark.parametrize("other", ["link.jsonl", "sub/../run.jsonl", "linked-dir/run.jsonl"])
def test_a_second_writer_through_another_path_is_refused(tmp_path, other):
    run = tmp_path / "run.jsonl"
    run.write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.jsonl").symlink_to("run.jsonl")
    (tmp_path / "linked-dir").symlink_to(tmp_path)
    held = _RunLock(run).acquire()
    try:
        with pytest.raises(RunLocked, match="another run"):
            _RunLock(tmp_path / other).acquire()
        assert _RunLock(tmp_path / other).path == _RunLock(run).path == tmp_path / "run.jsonl.lock"
    finally:
        held.release()
    second = _RunLock(tmp_path / other).acquire()  # free again once the first run ended
    second.release()
    assert not (tmp_path / "run.jsonl.lock").exists()


def test_a_run_file_not_written_yet_behind_a_symlink_shares_the_lock(tmp_path):
    (tmp_path / "link.jsonl").symlink_to("new.jsonl")  # its target does not exist yet
    held = _RunLock(tmp_path / "new.jsonl").acquire()
    try:
        with pytest.raises(RunLocked):
            _RunLock(tmp_path / "link.jsonl").acquire()
    finally:
        held.release()
