#!/usr/bin/env python3
"""Tests of plot_ring_timeline.py's sums (no GPU, no matplotlib): a made-up timeline of one rank
whose answers are worked out by hand below, and a malformed one that must be refused."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot_ring_timeline as prt  # noqa: E402


def span(stream, what, step, start, end, rank=0):
    return dict(rank=rank, stream=stream, what=what, step=step, start_ms=start, end_ms=end)


# Forward: no wait (every pass under step 0's attention). Backward: step 1 waits 5 ms for the
# dK, dV sums, and neither sums' pass runs under attention.
SPANS = [
    span("compute", "start", -1, 0.0, 0.1), span("compute", "forward", 0, 0.1, 10.0),
    span("comm", "pass K,V", 0, 0.1, 5.0), span("compute", "forward", 1, 10.0, 20.0),
    span("compute", "finish", -1, 20.0, 20.5),
    span("compute", "start", -1, 21.0, 21.1), span("compute", "backward", 0, 21.1, 40.0),
    span("comm", "pass K,V", 0, 21.1, 25.0), span("comm", "pass dK,dV", 0, 40.0, 45.0),
    span("compute", "backward", 1, 45.0, 60.0), span("comm", "pass dK,dV", 1, 60.0, 65.0),
    span("compute", "finish", -1, 65.0, 66.0),
]


class Sums(unittest.TestCase):
    def test_by_hand(self):
        fwd, bwd = prt.summarize(SPANS)
        expect_fwd = dict(rank=0, phase="forward", wall=20.5, busy=20.5, waiting=0.0, comm=4.9, hidden=4.9)
        expect_bwd = dict(rank=0, phase="backward", wall=45.0, busy=35.0, waiting=10.0, comm=13.9, hidden=3.9)
        for got, want in ((fwd, expect_fwd), (bwd, expect_bwd)):
            for key, value in want.items():
                if isinstance(value, float):
                    self.assertAlmostEqual(got[key], value, places=9, msg=key)
                else:
                    self.assertEqual(got[key], value, key)

    def test_two_ranks_apart(self):
        rows = prt.summarize(SPANS + [dict(s, rank=1, start_ms=s["start_ms"] + 1, end_ms=s["end_ms"] + 1)
                                      for s in SPANS])
        self.assertEqual([(r["rank"], r["phase"]) for r in rows],
                         [(0, "forward"), (0, "backward"), (1, "forward"), (1, "backward")])
        self.assertAlmostEqual(rows[3]["waiting"], 10.0)

    def test_table_names_the_run(self):
        meta = dict(ranks=2, transport="nccl", gpu="NVIDIA H200", dtype="bf16", head_dim=128, heads=16,
                    rank_seqlen=131072)
        text = prt.table(meta, prt.summarize(SPANS))
        self.assertIn("131,072 tokens a rank", text)
        self.assertIn("| 0 | backward | 45.00 | 35.00 | 10.00 | 13.90 | 28.1% |", text)

    def test_missing_backward_is_refused(self):
        with self.assertRaises(ValueError):
            prt.summarize([s for s in SPANS if s["start_ms"] < 21.0])


if __name__ == "__main__":
    unittest.main()
