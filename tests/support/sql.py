"""A small Spider-like database directory for the sql verifier's tests, built on disk by the tests."""
from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

SINGERS = [
    (1, "Joe Sharp", "Netherlands", 52, 1.75, "F"),
    (2, "Timbaland", "United States", 32, 1.80, "T"),
    (3, "Justin Brown", "France", 29, 1.68, "T"),
    (4, "Rose White", "France", 41, 1.62, "F"),
    (5, "John Nizinik", "France", 43, 1.90, "T"),
    (6, "Tribal King", "France", 25, 1.71, "T"),
    (7, "Ada Lovelace", "United States", 36, None, "F"),
]
STADIUMS = [
    (1, "Raith Rovers", "Stark's Park", 10104, 4812.0),
    (2, "Ayr United", "Somerset Park", 11998, 1477.0),
    (3, "East Fife", "Bayview Stadium", 2000, 864.5),
    (4, "Queen's Park", "Hampden Park", 52500, 730.25),
]
CONCERTS = [
    (1, "Auditions", "Free choice", 1, 2014),
    (2, "Super bootcamp", "Free choice 2", 2, 2014),
    (3, "Home Visits", "Bleeding Love", 2, 2015),
    (4, "Week 1", "Wide Awake", 4, 2014),
    (5, "Week 1", "Happy Tonight", 3, 2015),
]
SINGER_IN_CONCERT = [(1, 2), (1, 3), (1, 5), (2, 3), (2, 6), (3, 5), (4, 4), (5, 6), (5, 3)]


def build_concert_singer(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as conn:
        conn.executescript("""
            CREATE TABLE stadium (stadium_id INTEGER PRIMARY KEY, location TEXT, name TEXT, capacity INTEGER,
                                  average REAL);
            CREATE TABLE singer (singer_id INTEGER PRIMARY KEY, name TEXT, country TEXT, age INTEGER,
                                 height REAL, is_male TEXT);
            CREATE TABLE concert (concert_id INTEGER PRIMARY KEY, concert_name TEXT, theme TEXT,
                                  stadium_id INTEGER REFERENCES stadium(stadium_id), year INTEGER);
            CREATE TABLE singer_in_concert (concert_id INTEGER REFERENCES concert(concert_id),
                                            singer_id INTEGER REFERENCES singer(singer_id));
        """)
        conn.executemany("INSERT INTO stadium VALUES (?, ?, ?, ?, ?)", STADIUMS)
        conn.executemany("INSERT INTO singer VALUES (?, ?, ?, ?, ?, ?)", SINGERS)
        conn.executemany("INSERT INTO concert VALUES (?, ?, ?, ?, ?)", CONCERTS)
        conn.executemany("INSERT INTO singer_in_concert VALUES (?, ?)", SINGER_IN_CONCERT)
        # A wider table for throughput runs: point queries by key.
        conn.execute("CREATE TABLE item (item_id INTEGER PRIMARY KEY, label TEXT, price REAL)")
        conn.executemany("INSERT INTO item VALUES (?, ?, ?)",
                         [(i, f"item-{i}", round(i * 1.25, 2)) for i in range(1, 20_001)])
    conn.close()
    return path


def build_databases(root: Path) -> Path:
    """``root`` with concert_singer in the Spider layout (NAME/NAME.sqlite) and flat_db in the flat one."""
    build_concert_singer(root / "concert_singer" / "concert_singer.sqlite")
    build_concert_singer(root / "flat_db.sqlite")
    return root


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
