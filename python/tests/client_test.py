"""The Client's argument handling, without a server."""

import datetime
import unittest

import pandas as pd

from ranksweep import client as client_lib


class SinceTest(unittest.TestCase):
    """quarantine()'s `since`, read as `ranksweep workers quarantine --since`."""

    def test_times_to_unix_ms(self):
        since = client_lib._since_unix_ms
        self.assertEqual(since(None), 0)
        self.assertEqual(since(0), 0)
        self.assertEqual(since(1764590400), 1764590400000)
        self.assertEqual(since(1764590400.25), 1764590400250)
        self.assertEqual(since("1764590400"), 1764590400000)
        self.assertEqual(since("2025-12-01T12:00:00Z"), 1764590400000)
        self.assertEqual(since("2025-12-01t13:00:00.5+01:00"), 1764590400500)
        utc = datetime.timezone.utc
        self.assertEqual(since(datetime.datetime(2025, 12, 1, 12, tzinfo=utc)), 1764590400000)
        self.assertEqual(since(pd.Timestamp("2025-12-01 12:00:00.123", tz="UTC")),
                         1764590400123)

    def test_bad_times_name_the_argument(self):
        since = client_lib._since_unix_ms
        for text in ("yesterday", "2025-12-01", "2025-12-01T12:00:00", "2025-13-01T12:00:00Z",
                     "-5", ""):
            with self.assertRaises(ValueError) as ctx:
                since(text)
            self.assertEqual(str(ctx.exception),
                             f'since: "{text}" is not an RFC 3339 time (2026-12-01T13:00:00Z) '
                             f'or Unix seconds >= 0')
        with self.assertRaises(ValueError) as ctx:
            since(-1)
        self.assertEqual(str(ctx.exception), "since: must be 1970 or later")
        with self.assertRaises(ValueError) as ctx:
            since("1969-12-31T23:59:59Z")
        self.assertEqual(str(ctx.exception), "since: must be 1970 or later")
        with self.assertRaises(ValueError) as ctx:
            since(datetime.datetime(2025, 12, 1))
        self.assertEqual(str(ctx.exception),
                         "since: 2025-12-01 00:00:00 has no time zone; give one (e.g. "
                         "datetime.timezone.utc)")
        with self.assertRaises(ValueError):
            since(float("nan"))
        with self.assertRaises(TypeError):
            since(True)


if __name__ == "__main__":
    unittest.main()
