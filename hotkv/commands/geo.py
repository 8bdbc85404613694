"""Geo commands (Valkey's geo.c): GEOADD, GEODIST, GEOHASH, GEOPOS,
GEOSEARCH, GEOSEARCHSTORE, GEORADIUS, GEORADIUSBYMEMBER and the _RO forms.

A geo set is a plain sorted set (hotkv/types/zsets.py) whose scores are
52-bit interleaved geohashes; the arithmetic (hashes, search cells,
distances, reply text) is hotkv/types/geo.py's.  This module parses the
arguments in Valkey's order (so the same bad command gets the same error),
walks the sorted set over the score ranges of the search cells and builds
the replies.

Invariants:
* GEOADD is ZADD (Valkey rewrites it into one): it is logged to the AOF as
  the ZADD it became, notifies ``zadd`` and replies as ZADD;
* a search reads its source with a read lookup (keyspace hits/misses), even
  for the STORE forms; a STORE form whose result is empty deletes its
  destination (``del``) and replies 0, else it replaces it (``georadiusstore``
  or ``geosearchstore``, the dirty count raised by the number stored) and is
  logged as sent;
* results are ordered as Valkey orders them: unsorted in scan order, sorted
  by distance with a stable sort, or, when COUNT cuts the result, with
  Valkey's partial quicksort (types.geo.partial_sort), so ties come out the
  same.
"""

from __future__ import annotations

from ..core.registry import command, spec
from ..protocol import errors
from ..protocol.errors import CommandError, WrongType
from ..protocol.resp import NULL_ARRAY, DoubleText
from ..protocol.util import parse_int
from ..types import geo
from ..types.zsets import ZSetValue
from . import zsets
from .hashes import cfg
from .zset_ranges import parse_score

UNIT_ERROR = "ERR unsupported unit provided. please use M, KM, FT, MI"
DECODE_ERROR = "ERR could not decode requested zset member"

# georadiusGeneric's flags.
_COORDS = 1
_MEMBER = 2
_NOSTORE = 4
_SEARCH = 8
_SEARCHSTORE = 16

_SORT_NONE, _SORT_ASC, _SORT_DESC = 0, 1, 2


def _read(c, key):
    """The sorted set at key for a read (counted as a hit or a miss)."""
    v = c.db.lookup_read(key)
    if v is not None and type(v) is not ZSetValue:
        raise WrongType()
    return v


def _lonlat(lon_arg: bytes, lat_arg: bytes):
    lon = parse_score(lon_arg)
    lat = parse_score(lat_arg)
    if lon < geo.LON_MIN or lon > geo.LON_MAX or lat < geo.LAT_MIN or lat > geo.LAT_MAX:
        raise CommandError("ERR invalid longitude,latitude pair %f,%f" % (lon, lat))
    return lon, lat


def _unit(arg: bytes) -> float:
    to_m = geo.UNITS.get(arg.lower())
    if to_m is None:
        raise CommandError(UNIT_ERROR)
    return to_m


def _member_point(z, member):
    score = z.score(member)
    if score is None:
        raise CommandError(DECODE_ERROR)
    return geo.score_lonlat(score)


# ----------------------------------------------------------------------
# GEOADD / GEODIST / GEOHASH / GEOPOS
# ----------------------------------------------------------------------

@command("geoadd", -5, "write denyoom", group="geo", since="3.2.0",
         key_specs=(spec("RW update"),),
         summary=("Adds one or more members to a geospatial index. The key is created if it "
                  "doesn't exist."),
         args="key:k condition[NX | XX]@6.2.0 [change=CH]@6.2.0 data(longitude:d latitude:d "
              "member)...",
         complexity="O(log(N)) for each item added, where N is the number of elements in the "
                    "sorted set.", history=(("6.2.0", "Added the `CH`, `NX` and `XX` options."),))
def geoadd(c, argv):
    """GEOADD key [NX|XX] [CH] lon lat member ...: ZADD of the points' scores."""
    n = len(argv)
    i = 2
    nx = xx = False
    while i < n:
        opt = argv[i].lower()
        if opt == b"nx":
            nx = True
        elif opt == b"xx":
            xx = True
        elif opt != b"ch":
            break
        i += 1
    if (n - i) % 3 or (xx and nx):
        raise CommandError(errors.SYNTAX)
    zargv = [b"ZADD", *argv[1:i]]
    for j in range(i, n, 3):
        lon, lat = _lonlat(argv[j], argv[j + 1])
        zargv.append(b"%d" % geo.encode_score(lon, lat))
        zargv.append(argv[j + 2])
    # Valkey turns the command into this ZADD: logged as such when it writes.
    c.server.propagate_as(zargv)
    return zsets.zadd(c, zargv)


@command("geodist", -4, "readonly", (1, 1, 1), group="geo", since="3.2.0",
         args="key:k member1 member2 unit[M | KM | FT | MI]", complexity="O(1)")
def geodist(c, argv):
    """Returns the distance between two members of a geospatial index."""
    to_m = 1.0
    if len(argv) == 5:
        to_m = _unit(argv[4])
    elif len(argv) > 5:
        raise CommandError(errors.SYNTAX)
    z = _read(c, argv[1])
    if z is None:
        return None
    s1 = z.score(argv[2])
    s2 = z.score(argv[3])
    if s1 is None or s2 is None:
        return None
    lon1, lat1 = geo.score_lonlat(s1)
    lon2, lat2 = geo.score_lonlat(s2)
    return geo.format_distance(geo.distance(lon1, lat1, lon2, lat2) / to_m)


@command("geohash", -2, "readonly", (1, 1, 1), group="geo", since="3.2.0", args="key:k [member]...",
         complexity="O(1) for each member requested.")
def geohash(c, argv):
    """Returns members from a geospatial index as geohash strings."""
    z = _read(c, argv[1])
    out = []
    for member in argv[2:]:
        score = None if z is None else z.score(member)
        out.append(None if score is None else geo.geohash_text(score))
    return out


@command("geopos", -2, "readonly", (1, 1, 1), group="geo", since="3.2.0", args="key:k [member]...",
         complexity="O(1) for each member requested.")
def geopos(c, argv):
    """Returns the longitude and latitude of members from a geospatial index."""
    z = _read(c, argv[1])
    out = []
    for member in argv[2:]:
        score = None if z is None else z.score(member)
        if score is None:
            out.append(NULL_ARRAY)
        else:
            lon, lat = geo.score_lonlat(score)
            out.append([DoubleText(geo.format_coord(lon)), DoubleText(geo.format_coord(lat))])
    return out


# ----------------------------------------------------------------------
# Searches
# ----------------------------------------------------------------------

def _scan(z, shape, limit):
    """Points of z inside shape, in Valkey's scan order: [member, score,
    lon, lat, dist] lists; stops once ``limit`` (non-zero) are found."""
    found = []
    sl = z.sl
    cells = geo.search_boxes(shape)
    last = 0
    for i, cell in enumerate(cells):
        if cell is None:
            continue
        # Huge radii make neighbours coincide: a cell equal to the last one
        # scanned is skipped (the centre cell is never compared, as in Valkey).
        if last and cell == cells[last]:
            continue
        if limit and len(found) >= limit:
            break
        lo, hi = geo.box_scores(*cell)
        lo = float(lo)
        hi = float(hi)
        for score, member in sl.islice(sl.bisect_left((lo,))):
            if not score < hi:
                break
            hit = shape.within(score)
            if hit is not None:
                found.append([member, score, hit[0], hit[1], hit[2]])
                if limit and len(found) >= limit:
                    break
        last = i
    return found


def _asc(a, b):
    da, db = a[4], b[4]
    if da > db:
        return 1
    return 0 if da == db else -1


def _desc(a, b):
    return -_asc(a, b)


class _Query:
    """A search's options as georadiusGeneric parses them."""
    __slots__ = ("flags", "shape", "store", "storedist", "withdist", "withhash",
                 "withcoord", "frommember", "fromloc", "byradius", "bybox", "sort",
                 "any", "count")

    def __init__(self, flags):
        self.flags = flags
        self.shape = geo.Shape()
        self.store = None
        self.storedist = False
        self.withdist = self.withhash = self.withcoord = False
        self.frommember = self.fromloc = self.byradius = self.bybox = False
        self.sort = _SORT_NONE
        self.any = False
        self.count = 0

    def parse(self, argv, i, z):
        """The options from argv[i] on, in Valkey's order of checks."""
        n = len(argv)
        flags = self.flags
        shape = self.shape
        search = flags & _SEARCH
        storing = not (flags & _NOSTORE) and not search
        while i < n:
            arg = argv[i].lower()
            more = n - 1 - i          # arguments after this one
            if arg == b"withdist":
                self.withdist = True
            elif arg == b"withhash":
                self.withhash = True
            elif arg == b"withcoord":
                self.withcoord = True
            elif arg == b"any":
                self.any = True
            elif arg == b"asc":
                self.sort = _SORT_ASC
            elif arg == b"desc":
                self.sort = _SORT_DESC
            elif arg == b"count" and more >= 1:
                self.count = parse_int(argv[i + 1])
                if self.count <= 0:
                    raise CommandError("ERR COUNT must be > 0")
                i += 1
            elif arg in (b"store", b"storedist") and more >= 1 and storing:
                self.store = argv[i + 1]
                self.storedist = arg == b"storedist"
                i += 1
            elif arg == b"storedist" and search and flags & _SEARCHSTORE:
                self.storedist = True
            elif arg == b"frommember" and more >= 1 and search and not self.fromloc:
                if z is not None:
                    shape.lon, shape.lat = _member_point(z, argv[i + 1])
                self.frommember = True
                i += 1
            elif arg == b"fromlonlat" and more >= 2 and search and not self.frommember:
                shape.lon, shape.lat = _lonlat(argv[i + 1], argv[i + 2])
                self.fromloc = True
                i += 2
            elif arg == b"byradius" and more >= 2 and search and not self.bybox:
                shape.radius, shape.conversion = _distance_args(argv[i + 1], argv[i + 2])
                shape.kind = geo.CIRCLE
                self.byradius = True
                i += 2
            elif arg == b"bybox" and more >= 3 and search and not self.byradius:
                shape.width, shape.height, shape.conversion = _box_args(
                    argv[i + 1], argv[i + 2], argv[i + 3])
                shape.kind = geo.BOX
                self.bybox = True
                i += 3
            else:
                raise CommandError(errors.SYNTAX)
            i += 1

    def check(self, name: bytes):
        """The errors of options that do not go together (or are missing)."""
        search = self.flags & _SEARCH
        if self.store is not None and (self.withdist or self.withhash or self.withcoord):
            raise CommandError("ERR %s is not compatible with WITHDIST, WITHHASH and "
                               "WITHCOORD options" % ("GEOSEARCHSTORE"
                                                      if self.flags & _SEARCHSTORE
                                                      else "STORE option in GEORADIUS"))
        text = name.decode("utf-8", "surrogateescape")   # as the client spelt it
        if search and not (self.frommember or self.fromloc):
            raise CommandError("ERR exactly one of FROMMEMBER or FROMLONLAT can be "
                               "specified for %s" % text)
        if search and not (self.byradius or self.bybox):
            raise CommandError("ERR exactly one of BYRADIUS and BYBOX can be specified "
                               "for %s" % text)
        if self.any and not self.count:
            raise CommandError("ERR the ANY argument requires COUNT argument")


def _search(c, argv, src_index, flags):
    z = _read(c, argv[src_index])
    q = _Query(flags)
    shape = q.shape
    if flags & _COORDS:
        base = 6
        shape.kind = geo.CIRCLE
        shape.lon, shape.lat = _lonlat(argv[2], argv[3])
        shape.radius, shape.conversion = _distance_args(argv[4], argv[5])
    elif flags & _MEMBER:
        base = 5
        if z is not None:     # else the radius is not even parsed, as in Valkey
            shape.kind = geo.CIRCLE
            shape.lon, shape.lat = _member_point(z, argv[2])
            shape.radius, shape.conversion = _distance_args(argv[3], argv[4])
    elif flags & _SEARCHSTORE:
        base = 3
        q.store = argv[1]
    else:
        base = 2
    q.parse(argv, base, z)
    q.check(argv[0])
    if z is None:
        if q.store is not None:
            _delete_dest(c, q.store)
            return 0
        return []
    if q.count and q.sort == _SORT_NONE and not q.any:
        q.sort = _SORT_ASC       # the nearest COUNT need a sort
    found = _scan(z, shape, q.count if q.any else 0)
    if not found and q.store is None:
        return []
    total = len(found)
    returned = total if not q.count or total < q.count else q.count
    if q.sort != _SORT_NONE:
        found = _sorted(found, q.sort, returned)
    if q.store is None:
        return _reply(q, found, returned)
    return _store(c, q, found, returned)


def _sorted(found, sort, returned):
    cmp = _asc if sort == _SORT_ASC else _desc
    if returned != len(found):
        geo.partial_sort(found, cmp, 0, returned - 1)
    elif all(p[4] == p[4] for p in found):
        # glibc's qsort is a merge sort: stable, as Python's.
        found.sort(key=_dist, reverse=sort == _SORT_DESC)
    else:
        found = geo.merge_sort(found, cmp)   # NaN: no order, glibc's own steps
    return found


def _reply(q, found, returned):
    conversion = q.shape.conversion
    if not (q.withdist or q.withhash or q.withcoord):
        return [found[k][0] for k in range(returned)]
    out = []
    for k in range(returned):
        member, score, lon, lat, dist = found[k]
        item = [member]
        if q.withdist:
            item.append(geo.format_distance(dist / conversion))
        if q.withhash:
            item.append(int(score))
        if q.withcoord:
            item.append([DoubleText(geo.format_coord(lon)), DoubleText(geo.format_coord(lat))])
        out.append(item)
    return out


def _store(c, q, found, returned):
    if not returned:
        _delete_dest(c, q.store)
        return 0
    conversion = q.shape.conversion
    z_out = ZSetValue()
    maxlen = 0
    for k in range(returned):
        member, score, _, _, dist = found[k]
        z_out.set(member, dist / conversion if q.storedist else score)
        if len(member) > maxlen:
            maxlen = len(member)
    z_out.big = (returned > cfg(c, "zset-max-listpack-entries", 128)
                 or maxlen > cfg(c, "zset-max-listpack-value", 64))
    db = c.db
    db.set(q.store, z_out)
    c.server.written(db, q.store, "z",
                     "geosearchstore" if q.flags & _SEARCH else "georadiusstore", returned)
    return returned


def _dist(p):
    return p[4]


def _distance_args(value: bytes, unit: bytes):
    """(radius, metres per unit) of a ``<radius> <unit>`` pair."""
    d = parse_score(value, "ERR need numeric radius")
    if d < 0:
        raise CommandError("ERR radius cannot be negative")
    return d, _unit(unit)


def _box_args(width: bytes, height: bytes, unit: bytes):
    w = parse_score(width, "ERR need numeric width")
    h = parse_score(height, "ERR need numeric height")
    if h < 0 or w < 0:
        raise CommandError("ERR height or width cannot be negative")
    return w, h, _unit(unit)


def _delete_dest(c, key):
    db = c.db
    if db.lookup(key) is not None:
        db.delete(key)
        c.server.written(db, key, "g", "del")


def _store_specs(start: int):
    return (spec("RO access"), spec("OW update", "keyword STORE %d" % start),
            spec("OW update", "keyword STOREDIST %d" % start))


def _spec_keys(specs):
    """The keys_fn of a STORE form: the source key, then the STORE and the
    STOREDIST destination, each found as its key spec finds it (from the 7th
    argument of GEORADIUS, the 6th of GEORADIUSBYMEMBER), as Valkey's COMMAND
    GETKEYS and ACL key checks find them."""
    def keys(argv):
        return [p for s in specs for p in s.positions(argv)]
    return keys


_GEORADIUS_SPECS = _store_specs(6)
_BYMEMBER_SPECS = _store_specs(5)


# COMMAND DOCS fields the four GEORADIUS* commands share.
_RADIUS_COMPLEXITY = ("O(N+log(M)) where N is the number of elements inside the bounding box of "
                      "the circular area delimited by center and radius and M is the number of "
                      "items inside the index.")
_RADIUS_HISTORY = (("6.2.0", "Added the `ANY` option for `COUNT`."),
                   ("7.0.0", "Added support for uppercase unit names."))


@command("georadius", -6, "write denyoom", group="geo", since="3.2.0",
         keys_fn=_spec_keys(_GEORADIUS_SPECS), key_specs=_GEORADIUS_SPECS,
         summary=("Queries a geospatial index for members within a distance from a "
                  "coordinate, optionally stores the result."),
         args="key:k longitude:d latitude:d radius:d unit(M | KM | FT | MI) [WITHCOORD] "
              "[WITHDIST] [WITHHASH] count-block[(COUNT count:i) [ANY]@6.2.0] order[ASC | DESC] "
              "store[storekey(STORE key:k1) | storedistkey(STOREDIST key:k2)]",
         deprecated=("6.2.0", "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` argument"),
         complexity=_RADIUS_COMPLEXITY, history=_RADIUS_HISTORY)
def georadius(c, argv):
    """GEORADIUS key lon lat radius unit [options] [STORE|STOREDIST dst]."""
    return _search(c, argv, 1, _COORDS)


@command("georadius_ro", -6, "readonly", (1, 1, 1), group="geo", since="3.2.10",
         summary=("Returns members from a geospatial index that are within a distance from "
                  "a coordinate."),
         args="key:k longitude:d latitude:d radius:d unit(M | KM | FT | MI) [WITHCOORD] "
              "[WITHDIST] [WITHHASH] count-block[(COUNT count:i) [ANY]@6.2.0] order[ASC | DESC]",
         deprecated=("6.2.0", "`GEOSEARCH` with the `BYRADIUS` argument"),
         complexity=_RADIUS_COMPLEXITY, history=_RADIUS_HISTORY)
def georadius_ro(c, argv):
    """GEORADIUS without STORE/STOREDIST."""
    return _search(c, argv, 1, _COORDS | _NOSTORE)


@command("georadiusbymember", -5, "write denyoom", group="geo", since="3.2.0",
         keys_fn=_spec_keys(_BYMEMBER_SPECS), key_specs=_BYMEMBER_SPECS,
         summary=("Queries a geospatial index for members within a distance from a member, "
                  "optionally stores the result."),
         args="key:k member radius:d unit(M | KM | FT | MI) [WITHCOORD] [WITHDIST] [WITHHASH] "
              "count-block[(COUNT count:i) [ANY]] order[ASC | DESC] store[storekey(STORE key:k1) "
              "| storedistkey(STOREDIST key:k2)]",
         deprecated=("6.2.0",
                     "`GEOSEARCH` and `GEOSEARCHSTORE` with the `BYRADIUS` and `FROMMEMBER` "
                     "arguments"),
         complexity=_RADIUS_COMPLEXITY, history=_RADIUS_HISTORY)
def georadiusbymember(c, argv):
    """GEORADIUSBYMEMBER key member radius unit [options] [STORE|STOREDIST dst]."""
    return _search(c, argv, 1, _MEMBER)


@command("georadiusbymember_ro", -5, "readonly", (1, 1, 1), group="geo", since="3.2.10",
         summary=("Returns members from a geospatial index that are within a distance from "
                  "a member."),
         args="key:k member radius:d unit(M | KM | FT | MI) [WITHCOORD] [WITHDIST] [WITHHASH] "
              "count-block[(COUNT count:i) [ANY]] order[ASC | DESC]",
         deprecated=("6.2.0", "`GEOSEARCH` with the `BYRADIUS` and `FROMMEMBER` arguments"),
         complexity=_RADIUS_COMPLEXITY, history=_RADIUS_HISTORY)
def georadiusbymember_ro(c, argv):
    """GEORADIUSBYMEMBER without STORE/STOREDIST."""
    return _search(c, argv, 1, _MEMBER | _NOSTORE)


@command("geosearch", -7, "readonly", (1, 1, 1), group="geo", since="6.2.0",
         summary=("Queries a geospatial index for members inside an area of a box or a "
                  "circle."),
         args="key:k from(FROMMEMBER member | FROMLONLAT longitude:d latitude:d) "
              "by(circle((BYRADIUS radius:d) unit(M | KM | FT | MI)) | box((BYBOX width:d) "
              "height:d unit(M | KM | FT | MI))) order[ASC | DESC] count-block[(COUNT count:i) "
              "[ANY]] [WITHCOORD] [WITHDIST] [WITHHASH]",
         complexity="O(N+log(M)) where N is the number of elements in the grid-aligned bounding "
                    "box area around the shape provided as the filter and M is the number of items "
                    "inside the shape",
         history=(("7.0.0", "Added support for uppercase unit names."),))
def geosearch(c, argv):
    """GEOSEARCH key FROMMEMBER|FROMLONLAT BYRADIUS|BYBOX [options]."""
    return _search(c, argv, 1, _SEARCH)


@command("geosearchstore", -8, "write denyoom", group="geo", since="6.2.0",
         key_specs=(spec("OW update"), spec("RO access", "index 2")),
         summary=("Queries a geospatial index for members inside an area of a box or a "
                  "circle, optionally stores the result."),
         args="destination:k source:k1 from(FROMMEMBER member | FROMLONLAT longitude:d "
              "latitude:d) by(circle((BYRADIUS radius:d) unit(M | KM | FT | MI)) | box((BYBOX "
              "width:d) height:d unit(M | KM | FT | MI))) order[ASC | DESC] count-block[(COUNT "
              "count:i) [ANY]] [STOREDIST]",
         complexity="O(N+log(M)) where N is the number of elements in the grid-aligned bounding "
                    "box area around the shape provided as the filter and M is the number of items "
                    "inside the shape",
         history=(("7.0.0", "Added support for uppercase unit names."),))
def geosearchstore(c, argv):
    """GEOSEARCHSTORE dst src ... [STOREDIST]: GEOSEARCH into a sorted set."""
    return _search(c, argv, 2, _SEARCH | _SEARCHSTORE)
