"""Unit tests of bench/send_to_model.py's pure helpers (no harness, no server, well under a
second): python3 -m unittest bench/test_send_to_model.py"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import send_to_model as s  # noqa: E402


class Percentiles(unittest.TestCase):
    def test_linear_between_closest_ranks(self):
        xs = [4.0, 1.0, 3.0, 2.0, 5.0]
        self.assertEqual(s.percentile(xs, 50), 3.0)
        self.assertEqual(s.percentile(xs, 0), 1.0)
        self.assertEqual(s.percentile(xs, 100), 5.0)
        self.assertAlmostEqual(s.percentile(xs, 95), 4.8)
        self.assertAlmostEqual(s.percentile([1.0, 2.0], 50), 1.5)

    def test_one_and_none(self):
        self.assertEqual(s.percentile([7.0], 95), 7.0)
        self.assertIsNone(s.percentile([], 50))
        self.assertEqual(s.summarize([]), {"n": 0})

    def test_summarize(self):
        got = s.summarize([0.5, 1.5, 1.0])
        self.assertEqual(got["n"], 3)
        self.assertEqual(got["p50"], 1.0)
        self.assertEqual(got["max"], 1.5)
        self.assertEqual(got["mean"], 1.0)


class Matching(unittest.TestCase):
    RECS = [
        {"seq": 0, "ts": 10.0, "route": "messages", "body": {"messages": [{"content": "hi"}]}},
        {"seq": 1, "ts": 12.0, "route": "count_tokens", "body": {"messages": [{"content": "MARK-1"}]}},
        {"seq": 3, "ts": 14.0, "route": "messages", "body": {"messages": [{"content": "x MARK-1 y"}, "z"]}},
        {"seq": 2, "ts": 13.0, "route": "messages", "body": {"messages": [{"content": "a\u00e9 MARK-1"}]}},
        {"seq": 4, "ts": 15.0, "route": "other", "body_raw": "MARK-2 raw"},
    ]

    def test_earliest_request_carrying_the_marker(self):
        main = lambda r: r.get("route") == "messages"   # noqa: E731
        self.assertEqual(s.first_carrier(self.RECS, "MARK-1", main)["seq"], 2)
        # Without a filter the side request (count_tokens) at 12.0 is first.
        self.assertEqual(s.first_carrier(self.RECS, "MARK-1")["seq"], 1)

    def test_raw_bodies_and_misses(self):
        self.assertEqual(s.first_carrier(self.RECS, "MARK-2")["seq"], 4)
        self.assertIsNone(s.first_carrier(self.RECS, "MARK-3"))
        self.assertIsNone(s.first_carrier(self.RECS, "MARK-2", lambda r: r.get("route") == "messages"))

    def test_non_ascii_body_still_matches(self):
        self.assertIn("a\u00e9 MARK-1", s.record_text(self.RECS[3]))


class AccessLog(unittest.TestCase):
    def test_counts_only_pending_calls(self):
        lines = [
            '{"asctime": "2026-12-04 12:18:13,363", "name": "uvicorn.access", "levelname": "INFO", '
            '"message": "127.0.0.1:36294 - \\"POST /api/v1/agents/notes/pending HTTP/1.1\\" 200"}',
            'INFO:     127.0.0.1:5 - "POST /api/v1/agents/notes/pending?x=1 HTTP/1.1" 200 OK',
            '{"message": "127.0.0.1:1 - \\"POST /api/v1/agents/notes/ack HTTP/1.1\\" 200"}',
            '{"message": "127.0.0.1:1 - \\"POST /api/v1/agents/notes/pending-other HTTP/1.1\\" 404"}',
            'a note text mentioning /api/v1/agents/notes/pending',
        ]
        self.assertEqual(s.count_pending_polls(lines), 2)

    def test_per_minute(self):
        self.assertEqual(s.per_minute(4, 120.0), 2.0)
        self.assertIsNone(s.per_minute(4, 0))


if __name__ == "__main__":
    unittest.main()
