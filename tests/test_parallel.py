"""A cold check split over forked workers (tilefit.parallel) gives the serial run's output."""

from __future__ import annotations

import dataclasses
import os
import select

import pytest

from tilefit import parallel
from tilefit.api import CheckOptions, build_engine, run_check
from tilefit.config import Settings
from tilefit.engine import Engine

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked")


def _check(root, cache_dir, monkeypatch, jobs: str, targets=()):
    monkeypatch.setenv("TILEFIT_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv(parallel.ENV, jobs)
    settings = Settings()
    opts = CheckOptions(targets=list(targets), estimator="analytic")
    engine = build_engine(settings, opts)
    result = run_check([str(root)], opts, settings, engine)
    return result, engine


def _rows(result):
    return [dataclasses.asdict(d) for d in result.diagnostics]


def _vllm(corpus):
    root = corpus / "vllm-0.33.0"
    return root if root.is_dir() else corpus


def _spy_split(monkeypatch) -> list:
    """The number of processes of each split run (this one and its forked workers)."""
    calls = []
    real = parallel._run_split
    monkeypatch.setattr(parallel, "_run_split", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    return calls


def _failing_in(monkeypatch, where: str) -> None:
    """The shares of the split fail in ``where`` as a bug in the check would: ``"parent"``, this
    process, before it takes a task; ``"workers"``, once they took one (this process waits for
    that before it takes any)."""
    parent = os.getpid()
    real = parallel._check_share
    took_r, took_w = os.pipe()

    def check(engine, share, *a, **k):
        if os.getpid() != parent:
            if where == "workers":
                next(iter(share))
                os.write(took_w, b"x")
                raise RuntimeError("share bug")
        elif where == "parent":
            raise RuntimeError("share bug")
        else:
            assert select.select([took_r], [], [], 60)[0], "no worker took a task"
            os.close(took_r)
            os.close(took_w)
        return real(engine, share, *a, **k)

    monkeypatch.setattr(parallel, "_check_share", check)


def test_workers_give_the_serial_output(corpus, tmp_path, monkeypatch):
    root = _vllm(corpus)
    calls = _spy_split(monkeypatch)
    serial, se = _check(root, tmp_path / "serial", monkeypatch, "1", ["rtx4090"])
    split, pe = _check(root, tmp_path / "split", monkeypatch, "2", ["rtx4090"])
    assert calls == [2], "the run was not split over two processes"
    assert len(serial.diagnostics) > 100
    assert _rows(split) == _rows(serial)
    assert sorted(split.tables) == sorted(serial.tables)
    assert (pe.stats.files, pe.stats.entries) == (se.stats.files, se.stats.entries)
    # the split's results went into the result cache: a warm run answers from it, unchanged
    warm, _ = _check(root, tmp_path / "split", monkeypatch, "2", ["rtx4090"])
    assert _rows(warm) == _rows(serial)


def test_a_worker_checks_every_file_this_process_leaves(corpus, tmp_path, monkeypatch):
    """With this process's share failing before it takes a task, the worker takes them all: every
    file's diagnostics come back as the result cache's rows, the serial run's, and are kept."""
    root = _vllm(corpus)
    serial, se = _check(root, tmp_path / "serial", monkeypatch, "1", ["rtx4090"])
    collected = []
    real = parallel._Workers.collect
    monkeypatch.setattr(parallel._Workers, "collect", lambda self: collected.append(real(self)) or collected[-1])
    _failing_in(monkeypatch, "parent")
    split, pe = _check(root, tmp_path / "split", monkeypatch, "2", ["rtx4090"])
    assert len(collected) == 1 and sorted(collected[0]) == sorted(split.tables), "the worker did not check every file"
    assert _rows(split) == _rows(serial)
    assert not split.errors
    assert (pe.stats.files, pe.stats.entries) == (se.stats.files, se.stats.entries)
    monkeypatch.setattr(Engine, "check_table", None)  # a warm run checks nothing again
    warm, _ = _check(root, tmp_path / "split", monkeypatch, "1", ["rtx4090"])
    assert _rows(warm) == _rows(serial) and not warm.errors


def test_a_failed_worker_leaves_its_files_to_the_serial_loop(corpus, tmp_path, monkeypatch):
    root = _vllm(corpus)
    serial, _ = _check(root, tmp_path / "serial", monkeypatch, "1")
    outcomes = []
    real = parallel._run_split
    monkeypatch.setattr(parallel, "_run_split", lambda *a, **k: outcomes.append(real(*a, **k)) or outcomes[-1])
    _failing_in(monkeypatch, "workers")
    split, _ = _check(root, tmp_path / "split", monkeypatch, "2")
    assert len(outcomes) == 1 and len(outcomes[0]) < len(split.tables), "the worker took no task"
    assert _rows(split) == _rows(serial)
    assert not split.errors


def test_every_share_failing_leaves_the_check_to_the_serial_loop(corpus, tmp_path, monkeypatch):
    root = _vllm(corpus)
    serial, _ = _check(root, tmp_path / "serial", monkeypatch, "1")

    def broken(*a, **k):
        raise RuntimeError("share bug")

    monkeypatch.setattr(parallel, "_check_share", broken)
    split, _ = _check(root, tmp_path / "split", monkeypatch, "2")
    assert _rows(split) == _rows(serial)
    assert not split.errors


def test_the_queue_hands_each_file_to_one_process(corpus):
    """Two processes taking files from one queue in turn get every file once, each group's files
    together (its repeated entries checked by one process), the larger groups first."""
    from tilefit.discovery import discover

    items = [(path, meta, b"") for path, meta in discover([str(_vllm(corpus))]).files]
    tasks = parallel._tasks(items)
    assert len(tasks) > 2 and [len(t) for t in tasks] == sorted((len(t) for t in tasks), reverse=True)
    assert all(len({(m.family, m.engine, m.dtype) for _, m, _ in t}) == 1 for t in tasks)
    queue = parallel._queue(tasks)
    try:
        pullers = [parallel._pulled(queue, tasks), parallel._pulled(queue, tasks)]
        got: list[list] = [[], []]
        live = [0, 1]
        while live:  # one file each in turn: a puller takes its next task when its task is done
            for k in list(live):
                item = next(pullers[k], None)
                if item is None:
                    live.remove(k)
                else:
                    got[k].append(item[0])
    finally:
        os.close(queue)
    assert got[0] and got[1]
    assert sorted(got[0] + got[1]) == sorted(path for path, _, _ in items)
    for task in tasks:
        paths = {path for path, _, _ in task}
        assert paths <= set(got[0]) or paths <= set(got[1])


def test_few_files_or_one_job_stay_serial(monkeypatch):
    monkeypatch.setenv(parallel.ENV, "4")
    assert parallel.jobs_for(parallel.MIN_FILES - 1) == 1
    assert parallel.jobs_for(10 * parallel.MIN_FILES) == 4
    monkeypatch.setenv(parallel.ENV, "1")
    assert parallel.jobs_for(10 * parallel.MIN_FILES) == 1


def test_workers_plan_the_fixes_as_the_serial_loop_does(corpus, tmp_path, monkeypatch):
    """With the fix planner (``--output-format json``, ``full``, ``html``) the workers plan their
    files' fixes too: the same fixes on the same diagnostics, and the planner's plans behind them
    (bound to the fixes as a cache hit's are), as the serial run's."""
    from tilefit.app import run_check as app_check
    from tilefit.fix.stored import table_record

    root = (corpus / "sglang-0.5.23" / "sglang" / "srt" / "layers" / "moe" / "moe_runner" / "triton_utils" / "configs"
            / "triton_3_4_0")  # 33 tables (split from 4 files on: the test's size, not the CLI's)
    monkeypatch.setattr(parallel, "MIN_FILES", 4)
    calls = _spy_split(monkeypatch)

    def check(cache_dir, jobs):
        monkeypatch.setenv("TILEFIT_CACHE_DIR", str(cache_dir))
        monkeypatch.setenv(parallel.ENV, jobs)
        opts = CheckOptions(targets=["rtx4090"], estimator="analytic", fix=True, cache_fixes=True, cache_plans=True)
        return app_check([str(root)], opts, Settings())

    def plans(result):
        out = {}
        for d in result.diagnostics:
            if d.fix is not None:
                plan = result.planner.plan_for(d.fix)
                assert plan is not None, d
                out.setdefault(plan.path, {})[plan.key] = plan
        return {path: table_record(_table_plan(path, by_key)) for path, by_key in out.items()}

    serial = check(tmp_path / "serial", "1")
    split = check(tmp_path / "split", "2")
    assert calls == [2], "the run was not split over two processes"
    assert sum(d.fix is not None for d in serial.diagnostics) >= 20
    assert _rows(split) == _rows(serial)
    assert plans(split) == plans(serial)
    assert not split.errors
    # the workers' plans went into the result cache: a warm run restores them, unchanged
    warm = check(tmp_path / "split", "2")
    assert _rows(warm) == _rows(serial) and plans(warm) == plans(serial)


def _table_plan(path, by_key):
    from tilefit.fix.planner import TablePlan

    return TablePlan(path, plans=dict(sorted(by_key.items())))


def test_frames_cross_the_pipe_whole_and_in_order():
    """A worker's frames reach this process whole whatever the pipe holds at once: written without
    blocking as far as it takes them (the rest kept for the next frame, the last written out
    whole), read without waiting between tasks and to the end at the close."""
    import threading

    r, w = os.pipe()
    outbox, inbox = parallel._Outbox(w), parallel._Inbox(0, r)
    sent = [b"a", os.urandom(300_000), b"", os.urandom(70_000)]  # more than a pipe's buffer of 64 KiB
    got = []
    outbox.send(sent[0])
    got += inbox.frames(block=False)
    assert got == [sent[0]]
    outbox.send(sent[1])  # only a part fits: the worker goes on instead of waiting
    assert len(outbox.pending) > 0
    got += inbox.frames(block=False)  # a partial frame stays in the buffer
    outbox.send(sent[2])
    outbox.send(sent[3])
    reader = threading.Thread(target=lambda: got.extend(inbox.frames(block=True)))
    reader.start()
    outbox.close()
    reader.join(60)
    assert [bytes(f) for f in got] == sent and inbox.ended


def test_this_process_adopts_the_workers_results_between_its_tasks(corpus, tmp_path, monkeypatch):
    """While this process checks its tasks (slowed down here) the worker sends each of its tasks'
    results as it finishes it, and they are adopted before this process takes its next task,
    not at the end; the output is the serial run's, and the cache a warm run reads is the same."""
    import time

    root = _vllm(corpus)
    serial, se = _check(root, tmp_path / "serial", monkeypatch, "1", ["rtx4090"])
    parent = os.getpid()
    real_check = Engine.check_table

    def slow_here(self, table):
        if os.getpid() == parent:
            time.sleep(0.02)
        return real_check(self, table)

    monkeypatch.setattr(Engine, "check_table", slow_here)
    drained = []
    real_drain = parallel._Workers.drain
    monkeypatch.setattr(parallel._Workers, "drain",
                        lambda self, taking: real_drain(self, taking) or drained.append(len(self.outcomes)))
    split, pe = _check(root, tmp_path / "split", monkeypatch, "2", ["rtx4090"])
    assert any(drained), "no result of the worker was adopted before the end"
    assert _rows(split) == _rows(serial)
    assert (pe.stats.files, pe.stats.entries) == (se.stats.files, se.stats.entries)
    monkeypatch.setattr(Engine, "check_table", None)  # a warm run checks nothing again
    warm, _ = _check(root, tmp_path / "split", monkeypatch, "1", ["rtx4090"])
    assert _rows(warm) == _rows(serial) and not warm.errors


def test_a_cold_split_reads_each_file_in_the_process_that_checks_it(corpus, tmp_path, monkeypatch):
    """With nothing in the result cache nothing is read before the split (each process reads and
    digests its own files); with records of some files in it, every file is read first (the hits
    are answered), and the workers do not send back the bytes this process holds. Both give the
    serial run's diagnostics and tables."""
    from tilefit import readfile

    root = _vllm(corpus)
    serial, _ = _check(root, tmp_path / "serial", monkeypatch, "1", ["rtx4090"])
    reads_before_split = []
    real_read = readfile.read_bytes
    real_split = parallel._run_split
    split_started = []
    monkeypatch.setattr(parallel, "_run_split", lambda *a, **k: split_started.append(1) or real_split(*a, **k))

    def counting(path, *a, **k):
        in_root = os.path.commonpath([str(root), str(path)]) == str(root)
        if not split_started and str(path).endswith(".json") and in_root:
            reads_before_split.append(path)
        return real_read(path, *a, **k)

    monkeypatch.setattr(readfile, "read_bytes", counting)
    cold, _ = _check(root, tmp_path / "split", monkeypatch, "2", ["rtx4090"])
    assert split_started and reads_before_split == []
    assert _rows(cold) == _rows(serial)
    assert {p: t.data for p, t in cold.tables.items()} == {p: t.data for p, t in serial.tables.items()}
    # a cache that holds some files' records (one folder's, checked alone): every file read first
    some = sorted({os.path.dirname(p) for p in serial.tables})[0]
    split_started.clear()
    _check(some, tmp_path / "partial", monkeypatch, "1", ["rtx4090"])
    reads_before_split.clear()
    partial, _ = _check(root, tmp_path / "partial", monkeypatch, "2", ["rtx4090"])
    assert split_started and len(reads_before_split) == len(serial.tables)
    assert _rows(partial) == _rows(serial)
    assert {p: t.data for p, t in partial.tables.items()} == {p: t.data for p, t in serial.tables.items()}


def test_idle_cores_trust_the_tasks_runnable_now_over_a_lingering_load_average(monkeypatch, tmp_path):
    """A load average that still counts a run that has just ended does not keep the next run
    serial when nothing else is runnable now; a job runnable now keeps its core busy."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.6, 1.2, 1.0))
    monkeypatch.setattr(parallel, "_runnable_others", lambda: 0)
    assert parallel.idle_cores() == 2
    monkeypatch.setattr(parallel, "_runnable_others", lambda: 1)
    assert parallel.idle_cores() == 1
    monkeypatch.setattr(parallel, "_runnable_others", lambda: None)  # no /proc/loadavg: the average alone
    assert parallel.idle_cores() == 1
    monkeypatch.setattr(os, "getloadavg", lambda: (0.2, 0.2, 0.2))
    monkeypatch.setattr(parallel, "_runnable_others", lambda: 3)  # a job just started: the average says idle
    assert parallel.idle_cores() == 2


def test_runnable_others_reads_the_fourth_field_of_proc_loadavg(tmp_path):
    f = tmp_path / "loadavg"
    f.write_text("1.61 1.20 1.02 3/412 99\n")
    assert parallel._runnable_others(str(f)) == 2
    f.write_text("1.61 1.20\n")
    assert parallel._runnable_others(str(f)) is None
    assert parallel._runnable_others(str(tmp_path / "missing")) is None
