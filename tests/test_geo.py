"""The geo commands (hotkv/commands/geo.py, hotkv/types/geo.py) byte for
byte against the reference valkey-server 8.1.8, in RESP2 and RESP3.

* scenarios: every command, option and error, the argument-order cases
  (which error wins), odd scores in non-geo sorted sets, ties under COUNT,
  the STORE forms' destination (encoding, TTL, deletion when empty);
* seeded random workloads: thousands of members crowded at the poles'
  Mercator limits, on the antimeridian and at repeated positions, then
  searches of random centre, radius or box, unit, COUNT [ANY], order and
  WITH* options (GEOSEARCH, GEOSEARCHSTORE, GEORADIUS[BYMEMBER][_RO] with
  STORE/STOREDIST), searches whose edge passes exactly through a member
  (or one double inside it), writes in between, GEODIST/GEOPOS/GEOHASH,
  every reply compared;
* what the commands leave behind: the AOF (GEOADD logged as ZADD, the STORE
  forms as sent) next to the reference's, the keyspace events, keyspace
  hits/misses and the dirty count, COMMAND GETKEYS of the STORE forms;
* clients: valkey-py (RESP2) and redis-py (RESP3) through their geo APIs.

CI runs HOTKV_GEO_SEEDS=1-2 seeds of HOTKV_GEO_QUERIES=250 searches in each
protocol (a few seconds).  A long run:

    HOTKV_GEO_SEEDS=1-200 HOTKV_GEO_QUERIES=3000 python -m pytest -q tests/test_geo.py -k random
"""

from __future__ import annotations

import math
import os
import random
import re

import pytest

from hotkv.types import geo
from support import RawClient, ReferenceValkey, aof_commands, scenario_tests, start_aof_server


def _seeds(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


SEEDS = _seeds(os.environ.get("HOTKV_GEO_SEEDS", "1-2"))
QUERIES = int(os.environ.get("HOTKV_GEO_QUERIES", "250"))
LAT = "85.05112878"

SICILY = ("GEOADD", "Sicily", "13.361389", "38.115556", "Palermo",
          "15.087269", "37.502669", "Catania")
POINTS = ("GEOADD", "points", "-180", "0", "w", "180", "0", "e", "0", LAT, "n",
          "0", "-" + LAT, "s", "179.99999", LAT, "ne", "-179.99999", "-" + LAT, "sw",
          "0", "0", "o", "0.0000001", "0", "o2")

SCENARIOS = {
    "geoadd_options": [
        ("GEOADD", "g", "10", "20", "a"), ("GEOADD", "g", "10", "20", "a"),
        ("GEOADD", "g", "11", "20", "a"), ("GEOADD", "g", "CH", "12", "20", "a", "1", "1", "b"),
        ("GEOADD", "g", "NX", "13", "20", "a", "2", "2", "c"),
        ("GEOADD", "g", "XX", "13", "20", "a", "2", "2", "d"),
        ("GEOADD", "g", "CH", "NX", "14", "20", "a", "3", "3", "e"),
        ("GEOADD", "g", "CH", "XX", "15", "20", "a", "3", "3", "f"),
        ("GEOADD", "g", "XX", "NX", "1", "1", "x"), ("GEOADD", "g", "GT", "1", "1", "x"),
        ("GEOADD", "g", "nx", "xx", "ch", "ch"), ("GEOADD", "g", "ch", "ch", "ch"),
        ("GEOADD", "g", "1", "1"), ("GEOADD", "g", "ch", "1", "1", "x", "2"),
        ("GEOADD", "g", "INCR", "1", "1", "x"), ("GEOADD", "g", "XX", "CH", "1", "1", "x"),
        ("ZRANGE", "g", "0", "-1", "WITHSCORES"), ("GEOPOS", "g", "a", "b", "c", "d", "e", "f"),
        ("GEOADD", "newkey", "XX", "1", "1", "x"), ("EXISTS", "newkey"),
        ("SET", "str", "v"), ("GEOADD", "str", "1", "1", "x"),
        ("GEOADD", "str", "1", "1"), ("GEOADD", "str", "200", "1", "x"),
    ],
    "geoadd_coordinates": [
        ("GEOADD", "g", "200", "100", "x"), ("GEOADD", "g", "-180.0001", "0", "x"),
        ("GEOADD", "g", "0", "85.05112879", "x"), ("GEOADD", "g", "0", "-85.0511288", "x"),
        ("GEOADD", "g", "1e300", "1", "x"), ("GEOADD", "g", "-inf", "1", "x"),
        ("GEOADD", "g", "1", "inf", "x"), ("GEOADD", "g", "nan", "1", "x"),
        ("GEOADD", "g", "abc", "1", "x"), ("GEOADD", "g", "1", " 1", "x"),
        ("GEOADD", "g", "1 ", "1", "x"), ("GEOADD", "g", "", "1", "x"),
        ("GEOADD", "g", "1", "1", "ok", "1", "100", "bad"), ("EXISTS", "g"),
        ("GEOADD", "g", "1e-320", "-0", "tiny", "0x10", "1", "hex", "+5", ".5", "plus"),
        POINTS[:1] + ("g",) + POINTS[2:], ("ZRANGE", "g", "0", "-1", "WITHSCORES"),
        ("GEOPOS", "g", "w", "e", "n", "s", "ne", "sw", "o", "o2", "tiny", "hex", "plus"),
        ("GEOHASH", "g", "w", "e", "n", "s", "ne", "sw", "o", "o2", "tiny", "hex", "plus"),
        ("GEODIST", "g", "w", "e"), ("GEODIST", "g", "n", "s", "km"),
        ("GEODIST", "g", "o", "o2", "ft"), ("GEODIST", "g", "ne", "sw", "MI"),
    ],
    "geodist": [
        SICILY, ("GEODIST", "Sicily", "Palermo", "Catania"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "km"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "Mi"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "FT"),
        ("GEODIST", "Sicily", "Palermo", "Palermo"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "yd"),
        ("GEODIST", "Sicily", "Palermo", "Catania", "km", "x"),
        ("GEODIST", "Sicily", "Palermo", "nope"), ("GEODIST", "Sicily", "nope", "Palermo"),
        ("GEODIST", "nokey", "a", "b"), ("GEODIST", "nokey", "a", "b", "yd"),
        ("GEODIST", "nokey", "a", "b", "m", "x"), ("SET", "str", "v"),
        ("GEODIST", "str", "a", "b"), ("GEODIST", "str", "a", "b", "yd"),
        ("GEODIST", "Sicily", "Palermo"),
    ],
    "geohash_geopos": [
        SICILY, ("GEOHASH", "Sicily", "Palermo", "Catania", "nope"), ("GEOHASH", "Sicily"),
        ("GEOPOS", "Sicily", "Palermo", "nope", "Catania"), ("GEOPOS", "Sicily"),
        ("GEOHASH", "nokey", "a", "b"), ("GEOPOS", "nokey", "a", "b"), ("GEOPOS", "nokey"),
        ("SET", "str", "v"), ("GEOHASH", "str", "a"), ("GEOPOS", "str", "a"),
        ("SADD", "set", "a"), ("GEOPOS", "set", "a"),
    ],
    "non_geo_scores": [
        # Any sorted set can be read as a geo set: scores outside the 52-bit
        # range decode as C's (uint64_t) cast and the clamping make them.
        ("ZADD", "z", "-1", "neg", "1e19", "big", "1e20", "huge", "inf", "pinf",
         "-inf", "ninf", "5e18", "b5", "9.3e18", "b93", "-1e19", "nbig", "1.8e19", "b18",
         "0.5", "half", "4503599627370496", "two52", "9007199254740992", "two53",
         "18014398509481984", "two54", "-0.9", "negfrac", "1e-300", "denorm"),
        ("GEOPOS", "z", "neg", "big", "huge", "pinf", "ninf", "b5", "b93", "nbig", "b18",
         "half", "two52", "two53", "two54", "negfrac", "denorm"),
        ("GEOHASH", "z", "neg", "big", "huge", "pinf", "ninf", "b5", "b93", "nbig", "b18",
         "half", "two52", "two53", "two54", "negfrac", "denorm"),
        ("GEODIST", "z", "neg", "two54"), ("GEODIST", "z", "pinf", "ninf", "km"),
        ("GEOSEARCH", "z", "FROMMEMBER", "two52", "BYRADIUS", "20000", "km", "WITHHASH",
         "WITHCOORD", "ASC"),
        ("GEOSEARCH", "z", "FROMLONLAT", "0", "0", "BYBOX", "40000", "40000", "km",
         "WITHHASH", "WITHDIST"),
        ("GEORADIUSBYMEMBER", "z", "pinf", "1", "m", "WITHHASH"),
    ],
    "search_errors": [
        SICILY,
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "FROMLONLAT", "1", "2",
         "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "FROMMEMBER", "Palermo",
         "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "BYRADIUS", "1", "km", "ASC"),
        ("geosearch", "Sicily", "BYRADIUS", "1", "km", "ASC"),
        ("GeoSearch", "Sicily", "FROMLONLAT", "1", "2", "ASC"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km",
         "BYBOX", "1", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYBOX", "1", "1", "km",
         "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km", "STOREDIST"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km", "STORE", "x"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "nope", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "nope", "BYRADIUS", "x", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "200", "2", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "x", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "x", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "-1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "-1", "yd"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "yd"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "nan", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYBOX", "x", "y", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYBOX", "1", "y", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYBOX", "1", "-1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYBOX", "-1", "1", "yd"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYBOX", "1", "1", "yd"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYBOX", "1", "1"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km", "ANY"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km", "COUNT"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km", "COUNT", "0"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km", "COUNT", "-3"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km", "COUNT", "x"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km", "COUNT",
         "99999999999999999999"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km", "FOO"),
        ("GEOSEARCH", "Sicily", "COUNT", "0", "FROMLONLAT", "1", "2"),
        ("GEOSEARCH", "Sicily", "FOO", "FROMLONLAT", "1", "2"),
        ("GEOSEARCH", "Sicily", "ANY", "WITHDIST", "FROMLONLAT", "1", "2", "BYRADIUS", "1",
         "km"),
        ("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200",
         "km", "WITHDIST"),
        ("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200",
         "km", "WITHCOORD", "STOREDIST"),
        ("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200",
         "km", "STORE", "x"),
        ("GEOSEARCHSTORE", "dst", "Sicily", "BYRADIUS", "200", "km"),
        ("geosearchstore", "dst", "Sicily", "FROMMEMBER", "Palermo", "COUNT", "1"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST", "STORE", "x"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STOREDIST", "x", "WITHHASH"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STOREDIST"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "FROMLONLAT", "1", "2"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "BYRADIUS", "1", "km"),
        ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "STORE", "x"),
        ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "STOREDIST", "x"),
        ("GEORADIUSBYMEMBER_RO", "Sicily", "Palermo", "200", "km", "STORE", "x"),
        ("GEORADIUS", "Sicily", "200", "37", "200", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "-200", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "yd"),
        ("GEORADIUS", "Sicily", "15", "37", "x", "yd"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "0", "FOO"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "FOO", "COUNT", "0"),
        ("GEORADIUSBYMEMBER", "Sicily", "nope", "200", "km"),
        ("GEORADIUSBYMEMBER", "Sicily", "nope", "x", "yd"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "x", "km"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "1", "yd"),
        ("GEORADIUS", "Sicily", "15", "37", "200"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "1", "2"),
    ],
    "search_missing_and_wrong_type": [
        ("SET", "str", "v"), ("SET", "dst", "old"),
        ("GEOSEARCH", "str", "FROMLONLAT", "1", "2", "BYRADIUS", "x", "km"),
        ("GEOSEARCH", "str", "FOO"),
        ("GEORADIUS", "str", "200", "37", "200", "km"),
        ("GEORADIUSBYMEMBER", "str", "m", "200", "km"),
        ("GEOSEARCHSTORE", "dst", "str", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km"),
        ("GEOSEARCHSTORE", "str", "nokey", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km"),
        ("GET", "dst"), ("EXISTS", "str"),
        ("GEOSEARCH", "nokey", "FROMLONLAT", "1", "2", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "nokey", "FROMMEMBER", "m", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "nokey", "FROMMEMBER", "m", "BYRADIUS", "1", "yd"),
        ("GEOSEARCH", "nokey", "FROMMEMBER", "m", "BYRADIUS", "1", "km", "ANY"),
        ("GEOSEARCH", "nokey", "FROMMEMBER", "m"),
        ("GEOSEARCH", "nokey", "FROMLONLAT", "200", "2", "BYRADIUS", "1", "km"),
        ("GEORADIUS", "nokey", "200", "37", "200", "km"),
        ("GEORADIUS", "nokey", "15", "37", "200", "yd"),
        ("GEORADIUS", "nokey", "15", "37", "200", "km", "WITHDIST", "COUNT", "1"),
        ("GEORADIUSBYMEMBER", "nokey", "m", "x", "yd"),
        ("GEORADIUSBYMEMBER", "nokey", "m", "x", "yd", "COUNT", "0"),
        ("GEORADIUSBYMEMBER", "nokey", "m", "x", "yd", "FOO"),
        ("GEORADIUSBYMEMBER_RO", "nokey", "m", "x", "yd", "WITHDIST"),
        ("GEORADIUS", "nokey", "15", "37", "200", "km", "STORE", "dst"), ("EXISTS", "dst"),
        ("SET", "dst", "old"),
        ("GEOSEARCHSTORE", "dst", "nokey", "FROMMEMBER", "m", "BYBOX", "1", "1", "km"),
        ("EXISTS", "dst"),
        ("GEORADIUSBYMEMBER", "nokey", "m", "1", "km", "STOREDIST", "dst"),
    ],
    "search_results": [
        SICILY, ("GEOADD", "Sicily", "12.758489", "38.788135", "edge1",
                 "17.241510", "38.788135", "edge2"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "WITHDIST", "WITHCOORD", "WITHHASH"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "withcoord", "withcoord", "withdist"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "ASC", "DESC"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "DESC", "ASC", "WITHDIST"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1", "DESC"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "1", "ANY"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "ANY", "COUNT", "1", "ASC"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "COUNT", "5", "COUNT", "1"),
        ("GEORADIUS", "Sicily", "15", "37", "0", "km"),
        ("GEORADIUS", "Sicily", "15", "37", "1", "m"),
        ("GEORADIUS_RO", "Sicily", "15", "37", "200", "km", "WITHDIST", "ASC"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "WITHDIST"),
        ("GEORADIUSBYMEMBER_RO", "Sicily", "Palermo", "0", "m", "WITHCOORD"),
        ("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", "500", "km", "DESC",
         "WITHDIST", "WITHHASH", "WITHCOORD"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400", "km", "ASC",
         "WITHDIST"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "0", "0", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1e10", "1", "mi"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "1e30", "ft",
         "WITHDIST"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "inf", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "inf", "inf", "km"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "-15", "-37", "BYRADIUS", "1", "m"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "KM", "WITHDIST", "COUNT",
         "9223372036854775807"),
    ],
    "search_poles_antimeridian": [
        POINTS, ("GEOADD", "points", "179", "0", "e1", "-179", "0", "w1",
                 "0", "84", "n1", "180", "84", "n2", "-180", "-84", "s2"),
        ("GEOSEARCH", "points", "FROMLONLAT", "180", "0", "BYBOX", "500", "500", "km",
         "ASC", "WITHDIST", "WITHCOORD"),
        ("GEOSEARCH", "points", "FROMLONLAT", "-180", "0", "BYRADIUS", "300", "km",
         "WITHDIST"),
        ("GEOSEARCH", "points", "FROMMEMBER", "n", "BYRADIUS", "2000", "km", "DESC",
         "WITHDIST"),
        ("GEOSEARCH", "points", "FROMMEMBER", "s", "BYBOX", "40000", "400", "km",
         "WITHDIST"),
        ("GEORADIUSBYMEMBER", "points", "ne", "20000", "km", "WITHDIST", "ASC"),
        ("GEORADIUS", "points", "0", "0", "5000", "km", "WITHHASH"),
        ("GEORADIUS", "points", "0", "0", "20000", "km", "DESC", "COUNT", "3"),
        ("GEORADIUS", "points", "0", "0", "20000", "km", "COUNT", "4", "ANY"),
        ("GEORADIUS", "points", "0", "0", "0", "m", "WITHCOORD"),
        ("GEOSEARCH", "points", "FROMLONLAT", "0", LAT, "BYBOX", "100000", "10", "km"),
    ],
    "ties_under_count": [
        # 60 members at one point, 20 at another: equal distances, ordered by
        # Valkey's sorts (a stable one, or its partial quicksort under COUNT).
        ("GEOADD", "t", *[x for i in range(60) for x in ("10", "10", "a%02d" % i)]),
        ("GEOADD", "t", *[x for i in range(20) for x in ("10.5", "10", "b%02d" % i)]),
        ("GEOADD", "t", *[x for i in range(5) for x in ("9.7", "10", "c%d" % i)]),
        ("GEOSEARCH", "t", "FROMLONLAT", "10.1", "10", "BYRADIUS", "100", "km"),
        ("GEOSEARCH", "t", "FROMLONLAT", "10.1", "10", "BYRADIUS", "100", "km", "ASC"),
        ("GEOSEARCH", "t", "FROMLONLAT", "10.1", "10", "BYRADIUS", "100", "km", "DESC"),
        ("GEOSEARCH", "t", "FROMLONLAT", "10.1", "10", "BYRADIUS", "100", "km", "COUNT",
         "7"),
        ("GEOSEARCH", "t", "FROMLONLAT", "10.1", "10", "BYRADIUS", "100", "km", "COUNT",
         "63", "WITHDIST"),
        ("GEOSEARCH", "t", "FROMLONLAT", "10.1", "10", "BYRADIUS", "100", "km", "COUNT",
         "70", "DESC"),
        ("GEOSEARCH", "t", "FROMLONLAT", "10.1", "10", "BYRADIUS", "100", "km", "COUNT",
         "3", "DESC"),
        ("GEOSEARCH", "t", "FROMLONLAT", "10.1", "10", "BYRADIUS", "100", "km", "COUNT",
         "30", "ANY", "DESC"),
        ("GEOSEARCH", "t", "FROMMEMBER", "b00", "BYRADIUS", "100", "km", "COUNT", "25"),
        ("GEOSEARCHSTORE", "d", "t", "FROMMEMBER", "a00", "BYRADIUS", "100", "km",
         "COUNT", "61", "STOREDIST"),
        ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
    ],
    "store_destination": [
        SICILY, ("SET", "dst", "old", "EX", "100"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "dst"),
        ("TTL", "dst"), ("TYPE", "dst"), ("OBJECT", "ENCODING", "dst"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STOREDIST", "dst", "DESC"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "d1", "STOREDIST", "d2"),
        ("EXISTS", "d1"), ("ZRANGE", "d2", "0", "-1", "WITHSCORES"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "200", "km", "STOREDIST", "d3",
         "COUNT", "1"), ("ZRANGE", "d3", "0", "-1", "WITHSCORES"),
        ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "0", "km", "STOREDIST", "d3"),
        ("ZRANGE", "d3", "0", "-1", "WITHSCORES"),
        ("GEORADIUS", "Sicily", "15", "37", "1", "m", "STORE", "dst"), ("EXISTS", "dst"),
        ("GEOSEARCHSTORE", "Sicily", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS",
         "1", "km"), ("ZRANGE", "Sicily", "0", "-1", "WITHSCORES"),
        ("GEOADD", "long", "1", "1", "x" * 65, "1.1", "1.1", "short"),
        ("GEOSEARCHSTORE", "dst", "long", "FROMLONLAT", "1", "1", "BYRADIUS", "100", "km"),
        ("OBJECT", "ENCODING", "dst"), ("OBJECT", "ENCODING", "long"),
        ("GEOSEARCHSTORE", "dst", "long", "FROMLONLAT", "1.1", "1.1", "BYRADIUS", "1",
         "km", "STOREDIST"), ("OBJECT", "ENCODING", "dst"),
        ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
        ("GEOADD", "many", *[x for i in range(130) for x in ("2", "2", "m%d" % i)]),
        ("OBJECT", "ENCODING", "many"),
        ("GEOSEARCHSTORE", "dst", "many", "FROMLONLAT", "2", "2", "BYRADIUS", "1", "km"),
        ("OBJECT", "ENCODING", "dst"),
        ("GEOSEARCHSTORE", "dst", "many", "FROMLONLAT", "2", "2", "BYRADIUS", "1", "km",
         "COUNT", "128"), ("OBJECT", "ENCODING", "dst"), ("ZCARD", "dst"),
        ("GEOSEARCHSTORE", "dst", "many", "FROMLONLAT", "2", "2", "BYRADIUS", "1", "km",
         "COUNT", "5", "STOREDIST"), ("ZRANGE", "dst", "0", "-1", "WITHSCORES"),
    ],
    "transactions_and_scripts": [
        SICILY, ("MULTI",), ("GEOADD", "g", "1", "1", "a"), ("GEOPOS", "g", "a", "b"),
        ("GEODIST", "Sicily", "Palermo", "Catania"),
        ("GEOSEARCH", "Sicily", "FROMLONLAT", "15", "37", "BYRADIUS", "200", "km",
         "WITHCOORD", "WITHDIST"), ("EXEC",),
        ("EVAL", "return redis.call('GEOPOS', KEYS[1], ARGV[1], 'nope')", "1", "Sicily",
         "Palermo"),
        ("EVAL", "redis.setresp(3); return redis.call('GEOPOS', KEYS[1], ARGV[1], 'nope')",
         "1", "Sicily", "Palermo"),
        ("EVAL", "redis.setresp(3); local r = redis.call('GEOSEARCH', KEYS[1], 'FROMLONLAT',"
         " 15, 37, 'BYRADIUS', 200, 'km', 'WITHCOORD', 'WITHDIST', 'WITHHASH')"
         " return {r[1][1], r[1][2], r[1][3], tostring(r[1][4][1]['double'])}",
         "1", "Sicily"),
        ("EVAL", "return redis.call('GEOADD', KEYS[1], 1, 2, 'x')", "1", "Sicily"),
        ("EVAL", "return redis.pcall('GEOADD', KEYS[1], 1, 200, 'x')", "1", "Sicily"),
    ],
}

test_scenarios_resp2, test_scenarios_resp3 = scenario_tests(SCENARIOS)


# ----------------------------------------------------------------------
# Seeded random workloads
# ----------------------------------------------------------------------

_UNIT_M = {"m": 1.0, "km": 1000.0, "ft": 0.3048, "mi": 1609.34}


def _num(rng, x: float) -> str:
    """A coordinate or size as a client would send it: full precision, or
    rounded to a few decimals."""
    digits = rng.choice((None, None, 0, 2, 6))
    return repr(x) if digits is None else repr(round(x, digits))


def _lon(rng) -> float:
    k = rng.random()
    if k < 0.1:
        return rng.choice((180.0, -180.0, 179.9999999, -179.9999999, 0.0))
    if k < 0.4:
        return rng.uniform(170, 180) * rng.choice((1, -1))     # the antimeridian
    return rng.uniform(-180, 180)


def _lat(rng) -> float:
    k = rng.random()
    if k < 0.1:
        return rng.choice((geo.LAT_MAX, geo.LAT_MIN, 0.0, 85.0, -85.0))
    if k < 0.4:
        return rng.uniform(78, geo.LAT_MAX) * rng.choice((1, -1))  # near the poles' limits
    return rng.uniform(geo.LAT_MIN, geo.LAT_MAX)


def _points(rng, n: int) -> list:
    pts = []
    for _ in range(n):
        if pts and rng.random() < 0.05:
            pts.append(rng.choice(pts))          # a repeated position: equal distances
        elif pts and rng.random() < 0.1:
            lon, lat = rng.choice(pts)           # a near neighbour (a few metres)
            pts.append((max(-180.0, min(180.0, lon + rng.uniform(-1e-4, 1e-4))),
                        max(geo.LAT_MIN, min(geo.LAT_MAX, lat + rng.uniform(-1e-4, 1e-4)))))
        else:
            pts.append((_lon(rng), _lat(rng)))
    return pts


def _size(rng) -> list:
    """[value, unit] of a radius or box side: 0, metres to the globe's size."""
    unit = rng.choice(("m", "km", "ft", "mi", "KM", "Mi"))
    metres = 0.0 if rng.random() < 0.03 else 10 ** rng.uniform(0, 7.4)
    return [_num(rng, metres / _UNIT_M[unit.lower()]), unit]


def _search(rng, key: str, members: int) -> tuple:
    """One random search command (and the destination it writes, if any)."""
    kind = rng.choice(("GEOSEARCH", "GEOSEARCH", "GEOSEARCHSTORE", "GEORADIUS",
                       "GEORADIUS_RO", "GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO",
                       "GEORADIUS STORE"))
    opts = []
    if rng.random() < 0.5:
        opts += ["COUNT", str(rng.choice((1, 2, 3, 5, 10, 40, 100, 5000)))]
        if rng.random() < 0.3:
            opts.append("ANY")
    if rng.random() < 0.6:
        opts.append(rng.choice(("ASC", "DESC")))
    withs = [w for w in ("WITHDIST", "WITHHASH", "WITHCOORD") if rng.random() < 0.4]
    rng.shuffle(opts)   # option order is free (COUNT keeps its argument)
    member = "m%d" % rng.randrange(members)
    centre = [_num(rng, _lon(rng)), _num(rng, _lat(rng))]
    if kind in ("GEOSEARCH", "GEOSEARCHSTORE"):
        frm = ["FROMMEMBER", member] if rng.random() < 0.4 else ["FROMLONLAT", *centre]
        if rng.random() < 0.5:
            by = ["BYRADIUS", *_size(rng)]
        else:
            w, h = _size(rng), _size(rng)
            by = ["BYBOX", w[0], h[0], w[1]]
        if kind == "GEOSEARCH":
            return ("GEOSEARCH", key, *frm, *by, *opts, *withs), None
        dist = ["STOREDIST"] if rng.random() < 0.5 else []
        return ("GEOSEARCHSTORE", "dst", key, *frm, *by, *opts, *dist), "dst"
    if kind == "GEORADIUS STORE":
        store = [rng.choice(("STORE", "STOREDIST")), "dst"]
        return ("GEORADIUS", key, *centre, *_size(rng), *opts, *store), "dst"
    if kind.startswith("GEORADIUSBYMEMBER"):
        return (kind, key, member, *_size(rng), *opts, *withs), None
    return (kind, key, *centre, *_size(rng), *opts, *withs), None


def _edge_search(rng, pts) -> tuple:
    """A search of "big" whose edge passes exactly through a member: a
    radius (or half a box side) in metres equal to the member's distance
    from the centre as the geo math computes it, or the next double below
    (the member is then out).  Both servers must draw the line alike.
    Returns the command, the member's reply bytes, and whether it must be
    in the reply (None: either)."""
    j = rng.randrange(len(pts))
    lon, lat = geo.score_lonlat(float(geo.encode_score(*pts[j])))
    clon, clat = _lon(rng), _lat(rng)
    if rng.random() < 0.3:      # a centre near the member: small, exact radii
        clon = max(-180.0, min(180.0, lon + rng.uniform(-0.01, 0.01)))
        clat = max(geo.LAT_MIN, min(geo.LAT_MAX, lat + rng.uniform(-0.01, 0.01)))
    below = rng.random() < 0.3
    edge = (lambda x: math.nextafter(x, 0)) if below else (lambda x: x)
    opts = ("WITHDIST", "ASC") if rng.random() < 0.5 else ("COUNT", "3")
    if rng.random() < 0.5:
        radius = geo.distance(clon, clat, lon, lat)
        by = ("BYRADIUS", repr(edge(radius)), "m")
    else:
        width = 2 * geo.distance(lon, lat, clon, lat)
        height = 2 * geo.lat_distance(lat, clat)
        if rng.random() < 0.5:
            width = edge(width)
        else:
            height = edge(height)
        by = ("BYBOX", repr(width), repr(height), "m")
    # Where the member must be: in (on the edge), out (one double beyond
    # it), or either (COUNT keeps the nearest 3; a zero size, for a centre
    # on the member's meridian or parallel, has no double below it).
    inside = None if "COUNT" in opts or min(float(x) for x in by[1:-1]) == 0 else not below
    args = ("GEOSEARCH", "big", "FROMLONLAT", repr(clon), repr(clat), *by, *opts)
    return args, b"$%d\r\nm%d\r\n" % (len("m%d" % j), j), inside


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("proto", ["2", "3"])
def test_random_searches(diff, seed, proto):
    """Thousands of members (skiplist) and a hundred (listpack), then
    QUERIES random searches and reads: every reply byte-equal."""
    if proto == "3":
        diff.resp3()
    rng = random.Random(seed * 2 + (proto == "3"))
    n = rng.choice((2000, 3000))
    pts = _points(rng, n)
    for start in range(0, n, 500):
        args = []
        for i in range(start, min(n, start + 500)):
            args += [repr(pts[i][0]), repr(pts[i][1]), "m%d" % i]
        diff("GEOADD", "big", *args)
    for i in range(100):
        diff("GEOADD", "small", repr(pts[i][0]), repr(pts[i][1]), "m%d" % i)
    assert diff("OBJECT", "ENCODING", "big") == b"$8\r\nskiplist\r\n"
    assert diff("OBJECT", "ENCODING", "small") == b"$8\r\nlistpack\r\n"
    nonempty = 0
    edges = [0, 0]            # members on a search's edge, and those found
    for q in range(QUERIES):
        key = "big" if rng.random() < 0.7 else "small"
        args, dst = _search(rng, key, n if key == "big" else 200)
        reply = diff(*args)
        if reply not in (b"*0\r\n", b":0\r\n"):
            nonempty += 1
        if dst is not None:
            diff("ZRANGE", dst, "0", "-1", "WITHSCORES")
            diff("OBJECT", "ENCODING", dst)
        if q % 7 == 0:
            # Writes between the searches: GEOADD with options (the small set
            # grows past the listpack limit) or a raw score, any 52 bits.
            if rng.random() < 0.7:
                opts = [o for o in ("NX", "XX", "CH") if rng.random() < 0.25]
                if "NX" in opts and "XX" in opts:
                    opts.remove("XX")
                adds = []
                for _ in range(rng.randrange(1, 4)):
                    adds += [_num(rng, _lon(rng)), _num(rng, _lat(rng)),
                             "m%d" % rng.randrange(200)]
                diff("GEOADD", "small", *opts, *adds)
            else:
                diff("ZADD", "small", str(rng.randrange(1 << 52)), "m%d" % rng.randrange(200))
        if q % 4 == 0:
            args, member, inside = _edge_search(rng, pts)
            reply = diff(*args)
            if inside is False:
                assert member not in reply, args
            elif inside:
                # On the edge it is in, unless the search cells miss it (as
                # Valkey's do for huge radii near the poles): mostly in.
                edges[0] += 1
                edges[1] += member in reply
        if q % 5 == 0:
            a, b = "m%d" % rng.randrange(n), "m%d" % rng.randrange(n)
            diff("GEODIST", "big", a, b, rng.choice(("m", "km", "ft", "mi")))
            diff("GEOPOS", "big", a, b, "nope")
            diff("GEOHASH", "big", a, b, "nope")
    # The workload must reach members, not only empty areas, and the edge
    # searches must mostly find their member on the edge.
    assert nonempty > QUERIES // 4, nonempty
    assert edges[1] >= edges[0] * 3 // 4, edges


# ----------------------------------------------------------------------
# AOF, keyspace events, stats, key extraction
# ----------------------------------------------------------------------

WRITES = [
    SICILY, ("GEOADD", "Sicily", "NX", "1", "1", "Palermo"),        # no change: not logged
    ("GEOADD", "Sicily", "CH", "XX", "13.5", "38", "Palermo", "1", "1", "nope"),
    ("GEOADD", "Sicily", "1", "100", "bad"),                        # error: not logged
    ("GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "r1"),
    ("GEORADIUS", "Sicily", "15", "37", "200", "km"),               # a read: not logged
    ("GEORADIUSBYMEMBER", "Sicily", "Palermo", "500", "km", "STOREDIST", "r2", "COUNT", "1"),
    ("GEOSEARCHSTORE", "r3", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "400", "400",
     "km", "STOREDIST"),
    ("GEOSEARCHSTORE", "r3", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "1", "m"),
    ("GEOSEARCHSTORE", "r3", "Sicily", "FROMLONLAT", "15", "37", "BYBOX", "1", "1", "m"),
    ("GEORADIUS", "nokey", "15", "37", "200", "km", "STORE", "r1"),
    ("MULTI",), ("GEOADD", "m", "1", "2", "a"), ("GEOSEARCHSTORE", "r4", "m", "FROMMEMBER",
                                                 "a", "BYRADIUS", "1", "m"), ("EXEC",),
    ("EVAL", "redis.call('GEOADD', KEYS[1], 3, 4, 'b');"
     " return redis.call('GEORADIUS', KEYS[1], 3, 4, 1, 'km', 'STORE', KEYS[2])",
     "2", "m", "r5"),
    ("SET", "sentinel", "1"),
]


def test_aof_as_valkey_logs_it(hotkv_server_factory, tmp_path):
    """GEOADD is logged as the ZADD it becomes, the STORE forms as sent,
    nothing for reads, errors and no-ops: the same AOF commands as
    valkey-server 8.1.8; replaying hotkv's AOF rebuilds the same sets."""
    ours_dir = tmp_path / "hotkv"
    ours_dir.mkdir()
    srv = start_aof_server(hotkv_server_factory, ours_dir)
    ref = ReferenceValkey("--appendonly", "yes", "--appendfsync", "always").start()
    try:
        a = RawClient(srv.host, srv.port)
        b = RawClient(ref.host, ref.port)
        for args in WRITES:
            assert a.call(*args) == b.call(*args), args
        reads = [("ZRANGE", k, "0", "-1", "WITHSCORES")
                 for k in ("Sicily", "r1", "r2", "r3", "m", "r4", "r5")]
        expected = [b.call(*args) for args in reads]
        a.close()
        b.close()
        ours = aof_commands(ours_dir, framing=True)
        theirs = aof_commands(ref.dir, framing=True)
    finally:
        ref.stop()
    assert ours == theirs
    assert ours[1][0] == b"ZADD" and ours[-1] == [b"SET", b"sentinel", b"1"]
    assert [b"MULTI"] in ours and [b"EXEC"] in ours
    srv.stop()
    again = hotkv_server_factory(appendonly="yes", dir=str(ours_dir))
    c = RawClient(again.host, again.port)
    try:
        assert [c.call(*args) for args in reads] == expected
    finally:
        c.close()


def _events(client: RawClient) -> list:
    """Every keyspace message the subscriber got, up to its PING's reply."""
    client.send("PING")
    out = []
    for _ in range(1000):
        reply = client.read_reply()
        if reply.startswith(b"*2\r\n$4\r\npong"):
            return out
        out.append(reply)
    raise AssertionError("no PING reply after 1000 messages")


def test_keyspace_events(server, ref_server):
    """The same notifications, in the same order: zadd (GEOADD), the STORE
    forms' georadiusstore / geosearchstore, del for an empty result."""
    pairs = [(RawClient(server.host, server.port), RawClient(server.host, server.port)),
             (RawClient(ref_server.host, ref_server.port),
              RawClient(ref_server.host, ref_server.port))]
    got = []
    try:
        for cmd, sub in pairs:
            cmd.call("FLUSHALL")
            cmd.call("CONFIG", "SET", "notify-keyspace-events", "KEA")
            sub.call("PSUBSCRIBE", "__key*__:*")
            for args in WRITES:
                cmd.call(*args)
            got.append(_events(sub))
    finally:
        for cmd, sub in pairs:
            cmd.call("CONFIG", "SET", "notify-keyspace-events", "")
            cmd.close()
            sub.close()
    assert got[0] == got[1]
    assert any(b"georadiusstore" in m for m in got[0])
    assert any(b"geosearchstore" in m for m in got[0])


def _stats(client: RawClient) -> dict:
    text = client.call("INFO", "all").decode()
    out = {}
    for line in text.split("\r\n"):
        name, _, value = line.partition(":")
        if name in ("keyspace_hits", "keyspace_misses", "rdb_changes_since_last_save"):
            out[name] = int(value)
    return out


def test_hits_misses_and_dirty(diff):
    """Searches read their source as reads (hits and misses, the STORE forms
    too); a STORE adds the number of members stored to the dirty count."""
    diff("FLUSHALL")
    before = (_stats(diff.ours), _stats(diff.theirs))
    for args in WRITES + [("GEOPOS", "Sicily", "Palermo"), ("GEOHASH", "nokey", "x"),
                          ("GEODIST", "Sicily", "Palermo", "x"), ("GEODIST", "no", "a", "b"),
                          ("GEOSEARCH", "nokey", "FROMLONLAT", "1", "1", "BYRADIUS", "1", "m")]:
        diff(*args)
    after = (_stats(diff.ours), _stats(diff.theirs))
    deltas = [{k: after[i][k] - before[i][k] for k in after[i]} for i in (0, 1)]
    assert deltas[0] == deltas[1]
    assert deltas[0]["keyspace_hits"] > 0 and deltas[0]["keyspace_misses"] > 0


def _geo_commandstats(client: RawClient) -> list:
    text = client.call("INFO", "commandstats").decode()
    # Times differ; calls, rejected and failed calls must not.
    return sorted(re.sub(r"usec=\d+,usec_per_call=[\d.]+,", "", line)
                  for line in text.split("\r\n") if line.startswith("cmdstat_geo"))


def test_command_and_error_stats(diff):
    """Every scenario's commands again: the same calls, rejected calls
    (arity) and failed calls per geo command, and the same error counts."""
    diff("CONFIG", "RESETSTAT")
    for name in sorted(SCENARIOS):
        diff("FLUSHALL")
        for args in SCENARIOS[name]:
            diff(*args)
    diff("GEOADD", "g")
    stats = _geo_commandstats(diff.ours)
    assert stats == _geo_commandstats(diff.theirs)
    assert len(stats) == 10 and "rejected_calls=1," in "".join(stats)
    diff("INFO", "errorstats")


@pytest.mark.parametrize("args", [
    ("GEORADIUS", "src", "1", "2", "3", "km", "STORE", "d1"),
    ("GEORADIUS", "src", "1", "2", "3", "km", "STORE", "d1", "STOREDIST", "d2"),
    ("GEORADIUS", "src", "1", "2", "3", "store", "d1"),
    ("GEORADIUS", "src", "1", "2", "3", "km", "COUNT", "3"),
    ("GEORADIUSBYMEMBER", "src", "m", "3", "km", "STOREDIST", "d1"),
    ("GEORADIUSBYMEMBER", "src", "m", "3", "STORE", "d1"),
    ("GEORADIUS_RO", "src", "1", "2", "3", "km", "STORE", "d1"),
    ("GEOSEARCHSTORE", "d", "src", "FROMMEMBER", "m", "BYRADIUS", "1", "km"),
    ("GEOADD", "g", "1", "2", "m"), ("GEOPOS", "g", "m"),
])
def test_getkeys(diff, args):
    diff("COMMAND", "GETKEYS", *args)
    diff("COMMAND", "GETKEYSANDFLAGS", *args)


def test_store_wakes_a_blocked_pop(target):
    """A STORE form that creates its destination serves a BZPOPMIN blocked
    on it (and WATCH sees the change), on hotkv as on the reference."""
    admin = target.admin
    admin.call("GEOADD", "src", "1", "2", "a", "1.001", "2", "b")
    waiter = target.client()
    waiter.send("BZPOPMIN", "dst", "0")
    target.wait_blocked(admin, 1)
    watcher = target.client()
    watcher.call("WATCH", "dst2")
    assert admin.call("GEOSEARCHSTORE", "dst", "src", "FROMMEMBER", "a", "BYRADIUS", "1",
                      "km", "STOREDIST") == b":2\r\n"
    assert waiter.read_reply() == b"*3\r\n$3\r\ndst\r\n$1\r\na\r\n$1\r\n0\r\n"
    assert admin.call("GEORADIUS", "src", "1", "2", "1", "km", "STORE", "dst2") == b":2\r\n"
    watcher.call("MULTI")
    watcher.call("PING")
    assert watcher.call("EXEC") == b"*-1\r\n"


def test_acl_key_permissions(server, ref_server):
    """A user who may read src* and write dst*: the STORE forms need write
    access to the destination their key specs find, read access to the
    source -- the same allowed, refused and NOPERM texts as Valkey."""
    cases = [
        ("GEOADD", "src", "1", "2", "a"), ("GEOADD", "dst", "1", "2", "a"),
        ("GEORADIUS", "src", "1", "2", "100", "km", "STORE", "dst1"),
        ("GEORADIUS", "src", "1", "2", "100", "km", "STORE", "src2"),
        ("GEORADIUS", "src", "1", "2", "100", "km", "STOREDIST", "dst1", "STORE", "src2"),
        ("GEORADIUS", "dst", "1", "2", "100", "km"),
        ("GEORADIUS_RO", "src", "1", "2", "100", "km"),
        ("GEORADIUSBYMEMBER", "src", "a", "100", "km", "STOREDIST", "dst2"),
        ("GEORADIUSBYMEMBER", "src", "a", "100", "km", "STOREDIST", "other"),
        ("GEOSEARCHSTORE", "dst3", "src", "FROMMEMBER", "a", "BYRADIUS", "1", "km"),
        ("GEOSEARCHSTORE", "src", "src", "FROMMEMBER", "a", "BYRADIUS", "1", "km"),
        ("GEOSEARCH", "src", "FROMMEMBER", "a", "BYRADIUS", "1", "km"),
        ("GEOPOS", "dst", "a"), ("GEODIST", "src", "a", "a"),
    ]
    replies = []
    for srv in (server, ref_server):
        admin = RawClient(srv.host, srv.port)
        user = RawClient(srv.host, srv.port)
        try:
            admin.call("FLUSHALL")
            admin.call("GEOADD", "src", "1", "2", "a")
            assert admin.call("ACL", "SETUSER", "geo-acl", "on", ">pw", "resetkeys",
                              "%R~src*", "%W~dst*", "+@all") == b"+OK\r\n"
            assert user.call("AUTH", "geo-acl", "pw") == b"+OK\r\n"
            replies.append([user.call(*args) for args in cases])
        finally:
            admin.call("ACL", "DELUSER", "geo-acl")
            admin.call("FLUSHALL")
            admin.close()
            user.close()
    assert replies[0] == replies[1]
    assert sum(r.startswith(b"-NOPERM") for r in replies[0]) >= 4


# ----------------------------------------------------------------------
# Clients, unchanged
# ----------------------------------------------------------------------

def _client_calls(client):
    """The geo API of a client library, the same calls on either server."""
    client.flushall()
    out = [client.geoadd("Sicily", [13.361389, 38.115556, "Palermo",
                                    15.087269, 37.502669, "Catania"]),
           client.geoadd("Sicily", [13.5, 38.0, "Palermo"], xx=True, ch=True),
           client.geodist("Sicily", "Palermo", "Catania", unit="km"),
           client.geodist("Sicily", "Palermo", "nope"),
           client.geohash("Sicily", "Palermo", "x"),
           client.geopos("Sicily", "Palermo", "x"),
           client.geosearch("Sicily", longitude=15, latitude=37, radius=200, unit="km",
                            sort="ASC", withdist=True, withcoord=True, withhash=True),
           client.geosearch("Sicily", member="Palermo", width=400, height=100, unit="km",
                            sort="DESC", count=1),
           client.georadius("Sicily", 15, 37, 200, unit="km", withdist=True, sort="DESC"),
           client.georadiusbymember("Sicily", "Palermo", 200, unit="km", withcoord=True),
           client.geosearchstore("dst", "Sicily", member="Palermo", radius=1, unit="km"),
           client.zrange("dst", 0, -1, withscores=True),
           client.geosearchstore("dst", "Sicily", longitude=15, latitude=37, radius=200,
                                 unit="km", storedist=True),
           client.zrange("dst", 0, -1, withscores=True)]
    return out


@pytest.mark.parametrize("lib", ["valkey-py RESP2", "redis-py RESP3"])
def test_client_libraries(server, ref_server, lib):
    """valkey-py (RESP2) and redis-py (RESP3) through their geo methods:
    the same parsed results from hotkv as from the reference."""
    if lib.startswith("valkey"):
        import valkey
        make = lambda s: valkey.Valkey(host=s.host, port=s.port)  # noqa: E731
    else:
        import redis
        make = lambda s: redis.Redis(host=s.host, port=s.port, protocol=3)  # noqa: E731
    ours, theirs = make(server), make(ref_server)
    try:
        got = _client_calls(ours)
        assert got == _client_calls(theirs)
        assert got[0] == 2 and got[4][1] is None
    finally:
        ours.flushall()
        theirs.flushall()
        ours.close()
        theirs.close()


def test_crowded_point(diff):
    """5,000 members at one point: every distance equal, so the order of the
    results is the sorts' own (stable, or Valkey's partial quicksort under
    COUNT), and every cell around the point is full."""
    diff("GEOADD", "crowd", *[x for i in range(5000) for x in ("0", "0", "c%d" % i)])
    diff("GEOSEARCH", "crowd", "FROMLONLAT", "0", "0", "BYRADIUS", "20000", "km",
         "COUNT", "10", "DESC")
    diff("GEOSEARCH", "crowd", "FROMLONLAT", "0.001", "0", "BYRADIUS", "20000", "km",
         "COUNT", "4000", "WITHDIST")
    reply = diff("GEORADIUS", "crowd", "0", "0", "1", "m", "COUNT", "5000", "ASC")
    assert reply.startswith(b"*5000\r\n")


# ----------------------------------------------------------------------
# The pure parts (hotkv/types/geo.py) on their own
# ----------------------------------------------------------------------

def test_partial_sort_puts_the_first_k_in_place():
    """Whatever the ties, the first k positions hold what a full sort puts
    there (by distance) and nothing is lost; the ties' own order is
    checked against Valkey above (ties_under_count, test_crowded_point)."""
    def cmp(a, b):
        return (a[0] > b[0]) - (a[0] < b[0])

    rng = random.Random(5)
    for _ in range(400):
        n = rng.randrange(0, 100)
        dists = [rng.randrange(rng.choice((2, 7, 1000))) for _ in range(n)]
        items = [(d, i) for i, d in enumerate(dists)]
        a = list(items)
        k = rng.randrange(1, n + 1) if n else 1
        geo.partial_sort(a, cmp, 0, k - 1)
        assert sorted(a, key=lambda x: x[1]) == items
        assert [x[0] for x in a[:k]] == sorted(dists)[:k], (dists, k)


def test_scores_round_trip_within_a_cell():
    """encode_score then score_lonlat lands within half a cell of the point
    (cells are 360 / 2**26 degrees wide), over the whole valid range."""
    rng = random.Random(7)
    for _ in range(2000):
        lon = rng.uniform(geo.LON_MIN, geo.LON_MAX)
        lat = rng.uniform(geo.LAT_MIN, geo.LAT_MAX)
        back_lon, back_lat = geo.score_lonlat(float(geo.encode_score(lon, lat)))
        assert abs(back_lon - lon) <= 360 / 2 ** 26
        assert abs(back_lat - lat) <= 2 * geo.LAT_MAX / 2 ** 26


def test_unrolled_decoding_equals_the_stepwise_one():
    """score_lonlat (unrolled, table-driven: every search candidate goes
    through it) gives the same doubles as cell() followed step by step, for
    geo scores and for any 64-bit pattern a sorted set may hold."""
    import struct
    rng = random.Random(11)
    scores = [float(rng.randrange(1 << 54)) for _ in range(5000)]
    scores += [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
               for _ in range(5000)]
    scores += [0.0, -0.0, math.inf, -math.inf, 2.0 ** 63, 2.0 ** 64, -2.0 ** 63, -1.0, 0.5]
    for s in scores:
        if s == s:
            assert geo.score_lonlat(s) == geo.score_lonlat_by_cell(s), s
