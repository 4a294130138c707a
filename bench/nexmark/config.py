"""Nexmark's parameters (Beam's ``NexmarkConfiguration`` and ``GeneratorConfig``, the defaults
nexmark-flink keeps) and the id arithmetic every generator and query shares.

Event *numbers* ``0 .. num_events - 1`` are the generation order; with an out-of-order group
size ``g > 1`` the event at number ``n`` gets the *adjusted* number
``(n // g) * g + (n * 953) % g`` (Beam's ``nextAdjustedEventNumber``), which decides its id,
its kind and its event time, so event times are out of order within each group of ``g``.
The kind follows the id: ``id % total_proportion`` below ``person_proportion`` is a person,
then auctions, then bids (1 : 3 : 46 by default). Event time: ``base_time`` plus the adjusted
number times the inter-event delay ``1e6 / first_event_rate`` us (Beam's
``timestampAndInterEventDelayUsForEvent`` with one generator and a constant rate).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["NexmarkConfiguration", "FIRST_PERSON_ID", "FIRST_AUCTION_ID", "FIRST_CATEGORY_ID",
           "NUM_CATEGORIES", "HOT_AUCTION_RATIO", "HOT_SELLER_RATIO", "HOT_BIDDER_RATIO",
           "PERSON_ID_LEAD", "AUCTION_ID_LEAD", "BASE_TIME"]

#: ids start here so that queries find matches even on small runs (Beam's GeneratorConfig)
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
#: a "hot" auction / seller / bidder is the last id rounded down to a multiple of this
HOT_AUCTION_RATIO = 100
HOT_SELLER_RATIO = 100
HOT_BIDDER_RATIO = 100
#: bids and auctions may name people and auctions up to this many ids ahead of the newest
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
#: 2015-07-15T00:00:00Z in epoch ms (Beam's ``GeneratorConfig.BASE_TIME``)
BASE_TIME = 1_436_918_400_000


@dataclass(frozen=True)
class NexmarkConfiguration:
    """What a Nexmark run generates (Beam's ``NexmarkConfiguration`` fields, Python-cased).

    :param num_events: events to generate (the source is bounded).
    :param first_event_rate: events per second of *event time* (the inter-event delay is
        ``1e6 / first_event_rate`` us); nexmark-flink's suites use 10,000,000.
    :param person_proportion, auction_proportion, bid_proportion: 1 : 3 : 46.
    :param avg_person_byte_size, avg_auction_byte_size, avg_bid_byte_size: the average record
        sizes (200, 500, 100 bytes) the ``extra`` field pads to.
    :param hot_auction_ratio, hot_sellers_ratio, hot_bidders_ratio: 2, 4, 4: a bid goes to a
        hot auction with probability ``1 - 1/2``, an auction's seller and a bid's bidder are
        hot with probability ``1 - 1/4``.
    :param num_in_flight_auctions: 100 (bids name one of the newest auctions; auction lengths).
    :param num_active_people: 1000 (bidders and sellers are among the newest people).
    :param out_of_order_group_size: 1 (in order); ``g`` shuffles event times within groups.
    :param base_time: epoch ms of event number 0.
    :param max_out_of_orderness_ms: the watermark's bound, 4,000 ms (nexmark-flink's
        ``WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND``).
    :param window_size_sec, window_period_sec: q5's sliding window (10 s every 2 s, as
        nexmark-flink's q5); q7 and q8 use tumbling windows of ``window_size_sec``.
    :param session_gap_sec: q11's session gap (10 s, nexmark-flink).
    :param seed: the data's seed (each block of events draws from ``Random((seed, block))``).
    :raises ValueError: for a non-positive count, rate, proportion sum or group size.
    """

    num_events: int = 100_000
    first_event_rate: int = 10_000_000
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    avg_person_byte_size: int = 200
    avg_auction_byte_size: int = 500
    avg_bid_byte_size: int = 100
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    num_in_flight_auctions: int = 100
    num_active_people: int = 1000
    out_of_order_group_size: int = 1
    base_time: int = BASE_TIME
    max_out_of_orderness_ms: int = 4000
    window_size_sec: int = 10
    window_period_sec: int = 2
    session_gap_sec: int = 10
    seed: int = 0

    def __post_init__(self):
        for name in ("first_event_rate", "out_of_order_group_size", "hot_auction_ratio",
                     "hot_sellers_ratio", "hot_bidders_ratio", "num_active_people"):
            if getattr(self, name) < 1:
                raise ValueError(f"NexmarkConfiguration: {name} must be >= 1, got {getattr(self, name)}")
        if self.num_events < 0:
            raise ValueError(f"NexmarkConfiguration: num_events must be >= 0, got {self.num_events}")
        if min(self.person_proportion, self.auction_proportion, self.bid_proportion) < 1:
            raise ValueError("NexmarkConfiguration: every proportion must be >= 1, got "
                             f"{self.person_proportion}:{self.auction_proportion}:{self.bid_proportion}")

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    def adjusted_event_number(self, n: int) -> int:
        """Beam's ``nextAdjustedEventNumber``: ``n`` permuted within its out-of-order group."""
        g = self.out_of_order_group_size
        return (n // g) * g + (n * 953) % g

    def timestamp_for_event(self, adjusted: int) -> int:
        """Event time (epoch ms) of the adjusted event number ``adjusted``."""
        return self.base_time + adjusted * 1000 // self.first_event_rate

    def last_base0_person_id(self, event_id: int) -> int:
        """The newest person (0-based) at ``event_id`` (Beam's ``lastBase0PersonId``)."""
        epoch, offset = divmod(event_id, self.total_proportion)
        if offset >= self.person_proportion:
            offset = self.person_proportion - 1
        return epoch * self.person_proportion + offset

    def last_base0_auction_id(self, event_id: int) -> int:
        """The newest auction (0-based) at ``event_id`` (Beam's ``lastBase0AuctionId``); -1
        before the first auction."""
        epoch, offset = divmod(event_id, self.total_proportion)
        if offset < self.person_proportion:
            epoch -= 1
            offset = self.auction_proportion - 1
        elif offset >= self.person_proportion + self.auction_proportion:
            offset = self.auction_proportion - 1
        else:
            offset -= self.person_proportion
        return epoch * self.auction_proportion + offset

    def to_dict(self) -> dict:
        return asdict(self)
