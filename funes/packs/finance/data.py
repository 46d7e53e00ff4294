"""Bank data in: CSV rows parsed and categorised, category names matched, and the sample generator.

CSV sign convention: spending is positive and money in (refunds, income) negative, as on a card statement.
A bank export that writes debits negative is recognised ("auto": most non-income rows negative) and flipped.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import random
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path

import regex
from rapidfuzz import fuzz

from funes.errors import BadRequest

INCOME, OTHER = "Income", "Other"
CATEGORIES = ("Food & Dining", "Groceries", "Shopping", "Entertainment", "Transportation", "Bills & Utilities",
              "Health & Fitness", "Travel", INCOME)
SIGNS = ("auto", "spending_positive", "spending_negative")
DATE_FORMATS = ("%Y-%m-%d", "%Y/%m/%d", "%m/%d/%Y", "%d.%m.%Y", "%d %b %Y", "%b %d, %Y")  # slashes are US order
HEADERS = {"date": ("date", "transaction date", "posted date", "posting date"),
           "description": ("description", "details", "memo", "narrative"),
           "amount": ("amount",), "category": ("category",), "merchant": ("merchant", "payee")}
# keyword in merchant/description | merchant name (blank: from the description) | category | what it is (for search)
_KNOWN = """
starbucks       | Starbucks          | Food & Dining     | coffee shop
blue bottle     | Blue Bottle Coffee | Food & Dining     | coffee shop
dunkin          | Dunkin'            | Food & Dining     | coffee shop
chipotle        | Chipotle           | Food & Dining     | restaurant
mcdonald        | McDonald's         | Food & Dining     | fast food
doordash        | DoorDash           | Food & Dining     | food delivery
uber eats       | Uber Eats          | Food & Dining     | food delivery
grubhub         | Grubhub            | Food & Dining     | food delivery
trader joe      | Trader Joe's       | Groceries         | grocery store
whole foods     | Whole Foods        | Groceries         | grocery store
safeway         | Safeway            | Groceries         | grocery store
kroger          | Kroger             | Groceries         | grocery store
costco          | Costco             | Groceries         | warehouse club
shell           | Shell              | Transportation    | gas station fuel
chevron         | Chevron            | Transportation    | gas station fuel
exxon           | Exxon              | Transportation    | gas station fuel
uber            | Uber               | Transportation    | ride share taxi
lyft            | Lyft               | Transportation    | ride share taxi
netflix         | Netflix            | Entertainment     | streaming subscription
spotify         | Spotify            | Entertainment     | music streaming subscription
hulu            | Hulu               | Entertainment     | streaming subscription
amc             | AMC Theatres       | Entertainment     | cinema movies
steam           | Steam              | Entertainment     | video games
amazon          | Amazon             | Shopping          | online shopping
target          | Target             | Shopping          | department store
walmart         | Walmart            | Shopping          | department store
best buy        | Best Buy           | Shopping          | electronics store
ikea            | IKEA               | Shopping          | furniture store
zara            | Zara               | Shopping          | clothing store
pg&e            | PG&E               | Bills & Utilities | electricity gas utility bill
comcast         | Comcast            | Bills & Utilities | internet cable bill
verizon         | Verizon            | Bills & Utilities | phone bill
rent            |                    | Bills & Utilities | rent landlord housing
planet fitness  | Planet Fitness     | Health & Fitness  | gym membership
cvs             | CVS Pharmacy       | Health & Fitness  | pharmacy
walgreens       | Walgreens          | Health & Fitness  | pharmacy
delta           | Delta Air Lines    | Travel            | airline flight
united airlines | United Airlines    | Travel            | airline flight
airbnb          | Airbnb             | Travel            | lodging stay
marriott        | Marriott           | Travel            | hotel
payroll, direct dep, salary           |     | Income            | salary paycheck
coffee, cafe, espresso                |     | Food & Dining     | coffee shop
restaurant, diner, pizza, grill, bar  |     | Food & Dining     | restaurant
market, grocery, supermarket          |     | Groceries         | grocery store
parking, transit, toll, taxi          |     | Transportation    | transport
pharmacy, clinic, dental, gym         |     | Health & Fitness  | health
hotel, airline, airlines, inn         |     | Travel            | travel
electric, water, insurance, utility   |     | Bills & Utilities | bill
"""
MERCHANTS = {key.strip(): (name or None, category, kind) for keys, name, category, kind in (
    [cell.strip() for cell in line.split("|")] for line in _KNOWN.strip().splitlines()) for key in keys.split(",")}
_MERCHANT_RE = regex.compile(r"(?<![a-z0-9])(" + "|".join(
    regex.escape(k) for k in sorted(MERCHANTS, key=len, reverse=True)) + r")(?![a-z0-9])")
# what the user may call a category -> the category's name
ALIASES = {
    "Food & Dining": ("food", "dining", "restaurants", "restaurant", "takeout", "eating out", "dining out", "coffee"),
    "Groceries": ("grocery", "groceries", "supermarket"),
    "Transportation": ("transport", "gas", "fuel", "petrol", "car", "taxi", "rides", "commute", "transit"),
    "Bills & Utilities": ("bills", "utilities", "utility", "rent", "electricity", "phone", "internet"),
    "Health & Fitness": ("health", "healthcare", "medical", "pharmacy", "gym", "fitness"),
    "Entertainment": ("movies", "streaming", "subscriptions", "games", "fun"),
    "Travel": ("flights", "hotels", "vacation", "trips"),
    "Shopping": ("clothes", "clothing", "electronics"),
    INCOME: ("salary", "paycheck", "pay", "earnings"),
}
_AMOUNT_RE = regex.compile(r"^(\d{1,3}(,\d{3})+|\d+)(\.\d+)?$")


@dataclasses.dataclass(frozen=True)
class Row:
    """One parsed transaction; `cents` is money out positive."""

    line: int
    day: date
    description: str
    merchant: str
    category: str
    cents: int
    kind: str = ""

    @property
    def fingerprint(self) -> str:
        """The key duplicates share: date, description (case and spacing aside) and amount."""
        text = f"{self.day}|{' '.join(self.description.casefold().split())}|{self.cents}"
        return hashlib.sha1(text.encode()).hexdigest()

    @property
    def embed_text(self) -> str:
        """What the row's vector is computed from: merchant, what it is, category, description without codes."""
        words = " ".join(w for w in self.description.split() if not regex.search(r"\d", w))
        return f"{self.merchant} {self.kind} - {self.category} - {words}"


@dataclasses.dataclass
class Parsed:
    """The rows of a CSV worth storing, and the lines skipped with the reason for each."""

    rows: list[Row] = dataclasses.field(default_factory=list)
    skipped: list[tuple[int, str]] = dataclasses.field(default_factory=list)


def parse_date(text: str) -> date | None:
    """A date in one of DATE_FORMATS (an ISO time after it is ignored), or None."""
    text = text.strip()
    text = text[:10] if regex.match(r"\d{4}-\d\d-\d\d[T ]", text) else text
    for fmt in DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt).date()
        except ValueError:
            continue
    return None


def parse_cents(text: str) -> int | None:
    """Cents from "12.50", "-12.50", "$1,234.56", "(12.50)" (negative), or None."""
    s = text.strip().replace(" ", "")
    negative = s.startswith("(") and s.endswith(")") or s.startswith("-") or s.startswith("$-")
    s = s.strip("()").replace("$", "").lstrip("-+")
    if not _AMOUNT_RE.match(s):  # "12,50" is refused rather than read as 1250
        return None
    try:
        cents = int((Decimal(s.replace(",", "")) * 100).quantize(Decimal(1), ROUND_HALF_UP))
    except InvalidOperation:
        return None
    return -cents if negative else cents


def known_merchant(text: str) -> tuple[str | None, str, str] | None:
    """(merchant name, category, kind) of the first MERCHANTS keyword in a text, or None."""
    match = _MERCHANT_RE.search(text.casefold())
    return MERCHANTS[match.group(1)] if match else None


def merchant_from_description(description: str) -> str:
    """A merchant name from a bank description: words before the first store number or code."""
    words = []
    for word in regex.sub(r"^(sq|tst|pp|paypal)\s*\*\s*", "", description, flags=regex.I).split():
        if regex.search(r"[\d#*]", word) or len(words) == 3:
            break
        words.append(word)
    return " ".join(words).title() if words else description.strip()


def categorise(description: str, merchant: str, category: str) -> tuple[str, str, str]:
    """(merchant, category, kind) with blanks filled from MERCHANTS or the description."""
    found = known_merchant(f"{merchant} {description}")
    name, guessed, kind = found or (None, OTHER, "")
    merchant = merchant or name or merchant_from_description(description)
    canonical = {c.casefold(): c for c in CATEGORIES}
    category = canonical.get(category.casefold(), category) if category else guessed
    return merchant, category, kind


def _columns(header: list[str], path: str) -> dict[str, int]:
    names = [" ".join(h.casefold().replace("_", " ").split()) for h in header]
    columns = {key: next((names.index(a) for a in aliases if a in names), None) for key, aliases in HEADERS.items()}
    missing = [key for key in ("date", "description", "amount") if columns[key] is None]
    if missing:
        raise BadRequest(f"{path}: no {', '.join(missing)} column (found: {', '.join(header) or 'nothing'}); "
                         "a finance CSV needs date, description, amount, and may add category and merchant")
    return columns


def _row(line: int, cells: list[str], columns: dict[str, int]) -> Row | str:
    """A Row, or the reason the line is skipped."""
    def cell(key: str) -> str:
        i = columns[key]
        return cells[i].strip() if i is not None and i < len(cells) else ""

    day, cents, description = parse_date(cell("date")), parse_cents(cell("amount")), cell("description")
    if day is None:
        return f"bad date {cell('date')!r} (use YYYY-MM-DD)"
    if cents is None:
        return f"bad amount {cell('amount')!r}"
    if not description:
        return "empty description"
    merchant, category, kind = categorise(description, cell("merchant"), cell("category"))
    return Row(line, day, description, merchant, category, cents, kind)


def read_csv(path: str | Path, sign: str = "auto") -> Parsed:
    """Parse a bank CSV; `sign` is auto, spending_positive or spending_negative (debits written negative)."""
    if sign not in SIGNS:
        raise BadRequest(f"amount sign {sign!r} is not one of {', '.join(SIGNS)}")
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError) as e:
        raise BadRequest(f"{path}: cannot read the CSV ({type(e).__name__})") from None
    reader = csv.reader(io.StringIO(text, newline=""))
    columns = _columns(next(reader, []), str(path))
    parsed, seen = Parsed(), {}
    for cells in reader:
        if not any(c.strip() for c in cells):
            continue
        row = _row(reader.line_num, cells, columns)
        if isinstance(row, str):
            parsed.skipped.append((reader.line_num, row))
        elif row.fingerprint in seen:
            parsed.skipped.append((row.line, f"duplicate of line {seen[row.fingerprint]}"))
        else:
            seen[row.fingerprint] = row.line
            parsed.rows.append(row)
    spending = [r.cents for r in parsed.rows if r.category != INCOME]
    if sign == "spending_negative" or sign == "auto" and sum(c < 0 for c in spending) > len(spending) / 2:
        parsed.rows = [dataclasses.replace(r, cents=-r.cents) for r in parsed.rows]
    return parsed


def _norm(text: str) -> str:
    return " ".join(text.casefold().replace("&", " ").replace(" and ", " ").split())


def _closeness(query: str, category: str) -> float:
    """0-100: how well a user's word fits a category name (whole name, a word of it, or its start)."""
    words = [w for w in _norm(category).split() if len(w) > 1]
    best = max([fuzz.ratio(query, _norm(category))] + [fuzz.ratio(query, w) for w in words])
    return 95.0 if best < 95 and len(query) >= 4 and any(w.startswith(query) for w in words) else best


def match_category(query: str, known: list[str], cutoff: float) -> str | None:
    """The known category a user means ("food" -> "Food & Dining"), or None."""
    q = _norm(query)
    by_norm = {_norm(k): k for k in known}
    if q in by_norm:
        return by_norm[q]
    for canonical, aliases in ALIASES.items():
        if canonical in known and q in aliases:
            return canonical
    scored = [(_closeness(q, k), k) for k in known]
    score, best = max(scored, default=(0.0, None))
    return best if score >= cutoff else None


SAMPLE_SEED, SAMPLE_DAYS = 2025, 182  # the sample is the same file for the same end date
# description ({n}: a store number) | lowest and highest amount | chance of one on any day
_DAILY = (("STARBUCKS STORE #{n} SEATTLE WA", 4.25, 8.75, .22), ("BLUE BOTTLE COFFEE #{n}", 4.5, 7.5, .08),
          ("CHIPOTLE {n}", 9.5, 15.0, .08), ("DOORDASH*ORDER {n}", 18, 45, .05), ("TRADER JOE'S #{n}", 25, 95, .1),
          ("WHOLE FOODS MKT #{n}", 30, 140, .06), ("COSTCO WHSE #{n}", 80, 260, .03), ("SHELL OIL {n}", 35, 65, .06),
          ("CHEVRON {n}", 35, 65, .03), ("UBER *TRIP {n}", 9, 32, .06), ("LYFT *RIDE {n}", 8, 28, .03),
          ("AMAZON MKTPLACE PMTS {n}", 12, 120, .08), ("TARGET T-{n}", 15, 90, .04), ("BEST BUY #{n}", 40, 400, .01),
          ("AMC THEATRES {n}", 14, 36, .03), ("STEAM PURCHASE {n}", 5, 60, .02), ("CVS/PHARMACY #{n}", 6, 45, .03))
# day of month | description | merchant (blank: from the description) | amount, or a range to draw from
_MONTHLY = ((1, "GREENVIEW APTS RENT", "Greenview Apartments", 1850.0), (1, "ACME CORP PAYROLL", "ACME Corp", -3250.0),
            (15, "ACME CORP PAYROLL", "ACME Corp", -3250.0), (2, "PLANET FITNESS CLUB FEES", "", 24.99),
            (3, "NETFLIX.COM", "", 15.49), (5, "PG&E WEB ONLINE", "", (60, 140)), (8, "COMCAST CABLE COMM", "", 79.99),
            (10, "SPOTIFY USA", "", 10.99), (12, "VERIZON WIRELESS PAYMENT", "", 65.0))
# days before the end date | description | amount: a trip and a refund
_ONCE = ((38, "DELTA AIR LINES 0062347", 412.6), (37, "AIRBNB * HMQ4ZK", 689.0), (36, "UBER *TRIP AIRPORT", 54.3),
         (52, "AMAZON.COM REFUND", -34.99))


def _money(cents: int) -> str:
    text = f"{abs(cents) / 100:,.2f}"
    return ("-" if cents < 0 else "") + (f"${text}" if abs(cents) >= 100000 else text.replace(",", ""))


def _sample_row(rng: random.Random, day: date, description: str, merchant: str, amount) -> list[str]:
    """One CSV row; daily rows sometimes leave category or merchant blank for the import to fill."""
    cents = round(rng.uniform(*amount) * 100) if isinstance(amount, tuple) else round(amount * 100)
    merchant, category, _ = categorise(description, merchant, "")
    blank_category, blank_merchant = rng.random() < .12, rng.random() < .15
    return [day.isoformat(), description, _money(cents), "" if blank_category else category,
            "" if blank_merchant else merchant]


def sample_rows(end: date) -> list[list[str]]:
    """About 250 synthetic transactions over the SAMPLE_DAYS up to `end`, plus four bad rows."""
    rng, rows = random.Random(SAMPLE_SEED), []
    for offset in range(SAMPLE_DAYS - 1, -1, -1):
        day = end - timedelta(days=offset)
        for dom, description, merchant, amount in _MONTHLY:
            if day.day == dom:
                rows.append(_sample_row(rng, day, description, merchant, amount))
        for template, low, high, chance in _DAILY:
            if rng.random() < chance:
                description = template.format(n=rng.randint(100, 9999))
                rows.append(_sample_row(rng, day, description, "", (low, high)))
        for before, description, amount in _ONCE:
            if offset == before:
                rows.append(_sample_row(rng, day, description, "", amount))
    day = rows[40][0]
    rows[30:30] = [["2025-02-30", "WALGREENS #4410", "12.99", "Health & Fitness", "Walgreens"]]
    rows[60:60] = [[day, "TARGET T-1843", "twelve", "Shopping", "Target"]]
    rows[90:90] = [[day, "", "15.00", "", ""]]
    rows[120:120] = [list(rows[119])]
    return rows


def write_sample(directory: Path, end: date | None = None) -> list[Path]:
    """Write the sample bank CSV (about six months up to `end`, default today) into `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "finance_transactions.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["Date", "Description", "Amount", "Category", "Merchant"])
        writer.writerows(sample_rows(end or date.today()))
    return [path]
