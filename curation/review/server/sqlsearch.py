"""A search engine for argilla-server that answers from the server's own SQL database.

argilla-server keeps every fact (records, fields, metadata, responses, suggestions, vectors,
statuses) in SQL and only mirrors it into Elasticsearch for search. This engine ignores the
mirroring hooks and answers searches, progress and metrics straight from the same database, so
the embedded server needs no Elasticsearch. It reproduces the semantics of
`argilla_server/search_engine/commons.py` (the Elasticsearch engine), with these known
differences: text search matches whole words (or `word*` prefixes) case-insensitively without
relevance ranking; records come back in insertion order, not in a per-annotator random order;
similarity search is exact (cosine over every vector), not approximate.

Written for SQLite (it uses `json_each` and SQLAlchemy's SQLite REGEXP); it runs inside the
argilla-server virtual environment and imports nothing from mashbill. Registered as
`ARGILLA_SEARCH_ENGINE=mashbill-sql` when this module is imported.
"""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import datetime, timezone
from typing import Any, Iterable, List, Optional, Union
from uuid import UUID

from sqlalchemy import String, and_, cast, exists, false, func, literal, not_, or_, select, true
from sqlalchemy.sql import ColumnElement

from argilla_server.database import AsyncSessionLocal
from argilla_server.enums import (
    MetadataPropertyType,
    RecordSortField,
    ResponseStatusFilter,
    SimilarityOrder,
    SortOrder,
)
from argilla_server.models import (
    Dataset,
    Field,
    MetadataProperty,
    Question,
    Record,
    Response,
    Suggestion,
    User,
    Vector,
    VectorSettings,
)
from argilla_server.search_engine.base import (
    AndFilter,
    Filter,
    FloatMetadataMetrics,
    IntegerMetadataMetrics,
    MetadataFilterScope,
    MetadataMetrics,
    Order,
    RangeFilter,
    RecordFilterScope,
    ResponseFilterScope,
    SearchEngine,
    SearchResponseItem,
    SearchResponses,
    SuggestionFilterScope,
    TermsFilter,
    TermsMetrics,
    TextQuery,
)

ENGINE_NAME = "mashbill-sql"
VERSION = "1"


# ------------------------------------------------------------------ JSON helpers


def _path(*keys: str) -> str:
    return "$" + "".join(f'."{k}"' for k in keys)


def _json_each(column, *keys: str):
    """The values at a JSON path: one row per element of an array, one row for a scalar, none if absent."""
    return func.json_each(column, _path(*keys)).table_valued("value", "type")


def _any_value_in(column, keys: tuple, values: List[str]) -> ColumnElement:
    each = _json_each(column, *keys)
    return exists(select(literal(1)).select_from(each).where(cast(each.c.value, String).in_(values)))


def _any_value_in_range(column, keys: tuple, ge, le) -> ColumnElement:
    each = _json_each(column, *keys)
    conds = [each.c.type.in_(["integer", "real"])]
    if ge is not None:
        conds.append(each.c.value >= ge)
    if le is not None:
        conds.append(each.c.value <= le)
    return exists(select(literal(1)).select_from(each).where(and_(*conds)))


def _json_scalar(column, *keys: str):
    return func.json_extract(column, _path(*keys))


def _as_datetime(value: Union[float, str, None]) -> Optional[datetime]:
    """Range bounds on record timestamps: ISO strings or epoch milliseconds (as Elasticsearch reads them)."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(value / 1000, tz=timezone.utc).replace(tzinfo=None)
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    return parsed


def _as_uuids(values: Iterable[str]) -> List[UUID]:
    out = []
    for v in values:
        try:
            out.append(UUID(str(v)))
        except ValueError:
            continue
    return out


# ------------------------------------------------------------------ text query

_TOKEN_RE = re.compile(r'(-?)"([^"]*)"|(\S+)')


def _text_terms(q: str) -> List[tuple]:
    """(negated, phrase, prefix) per term of a simple query string; every term must match (AND)."""
    terms = []
    for m in _TOKEN_RE.finditer(q):
        if m.group(2) is not None:
            negated, word = bool(m.group(1)), m.group(2).strip()
            prefix = False
        else:
            word = m.group(3)
            negated = word.startswith("-") and len(word) > 1
            word = word.lstrip("+-|")
            prefix = word.endswith("*")
            word = word.strip("*()~")
        if word:
            terms.append((negated, word, prefix))
    return terms


def _term_pattern(word: str, prefix: bool) -> str:
    # (?i) inline: SQLAlchemy's SQLite REGEXP ignores `flags`; Python's re folds case for all of Unicode.
    pattern = r"(?i)(?<!\w)" + r"\s+".join(re.escape(part) for part in word.split())
    return pattern if prefix else pattern + r"(?!\w)"


# ------------------------------------------------------------------ the engine


@SearchEngine.register(engine_name=ENGINE_NAME)
@dataclasses.dataclass
class SQLSearchEngine(SearchEngine):
    """Answers from SQL; the write hooks are no-ops because the database already holds every fact."""

    @classmethod
    async def new_instance(cls) -> "SQLSearchEngine":
        return cls()

    async def close(self):
        return None

    async def ping(self) -> bool:
        async with AsyncSessionLocal() as db:
            return (await db.execute(select(literal(1)))).scalar() == 1

    async def info(self) -> dict:
        return {"distribution": ENGINE_NAME, "version": VERSION, "backend": "sql"}

    # -------------------------------------------------------------- write hooks: nothing to mirror

    async def create_index(self, dataset: Dataset):
        return None

    async def delete_index(self, dataset: Dataset):
        return None

    async def configure_metadata_property(self, dataset: Dataset, metadata_property: MetadataProperty):
        return None

    async def configure_index_vectors(self, vector_settings: VectorSettings):
        return None

    async def index_records(self, dataset: Dataset, records: Iterable[Record]):
        return None

    async def partial_record_update(self, record: Record, **update):
        return None

    async def delete_records(self, dataset: Dataset, records: Iterable[Record]):
        return None

    async def update_record_response(self, response: Response):
        return None

    async def delete_record_response(self, response: Response):
        return None

    async def update_record_suggestion(self, suggestion: Suggestion):
        return None

    async def delete_record_suggestion(self, suggestion: Suggestion):
        return None

    # -------------------------------------------------------------- progress and metrics

    async def get_dataset_progress(self, dataset: Dataset) -> dict:
        if dataset.is_draft:
            return {}
        async with AsyncSessionLocal() as db:
            rows = (await db.execute(
                select(Record.status, func.count()).where(Record.dataset_id == dataset.id).group_by(Record.status)
            )).all()
        counts = {str(getattr(status, "value", status)): n for status, n in rows}
        return {"total": sum(counts.values()), **counts}

    async def get_dataset_user_progress(self, dataset: Dataset, user: User) -> dict:
        if dataset.is_draft:
            return {}
        async with AsyncSessionLocal() as db:
            rows = (await db.execute(
                select(Response.status, func.count())
                .join(Record, Record.id == Response.record_id)
                .where(Record.dataset_id == dataset.id, Response.user_id == user.id)
                .group_by(Response.status)
            )).all()
        counts = {str(getattr(status, "value", status)): n for status, n in rows}
        return {"total": sum(counts.values()), **counts}

    async def compute_metrics_for(self, metadata_property: MetadataProperty) -> MetadataMetrics:
        each = _json_each(Record.metadata_, metadata_property.name)
        base = select(each.c.value).select_from(Record).join(each, true()).where(
            Record.dataset_id == metadata_property.dataset_id)
        async with AsyncSessionLocal() as db:
            if metadata_property.type == MetadataPropertyType.terms:
                sub = base.subquery()
                term = cast(sub.c.value, String)
                rows = (await db.execute(
                    select(term, func.count()).group_by(term).order_by(func.count().desc(), term))).all()
                total = sum(n for _, n in rows)
                return TermsMetrics(total=total, values=[TermsMetrics.TermCount(term=t, count=n) for t, n in rows])
            sub = base.where(each.c.type.in_(["integer", "real"])).subquery()
            lo, hi = (await db.execute(select(func.min(sub.c.value), func.max(sub.c.value)))).one()
        if metadata_property.type == MetadataPropertyType.integer:
            return IntegerMetadataMetrics(min=None if lo is None else int(lo), max=None if hi is None else int(hi))
        return FloatMetadataMetrics(min=None if lo is None else float(lo), max=None if hi is None else float(hi))

    # -------------------------------------------------------------- search

    async def search(
        self,
        dataset: Dataset,
        query: Optional[Union[TextQuery, str]] = None,
        filter: Optional[Filter] = None,
        sort: Optional[List[Order]] = None,
        offset: int = 0,
        limit: int = 100,
        user_id: Optional[Any] = None,
        **_: Any,
    ) -> SearchResponses:
        async with AsyncSessionLocal() as db:
            where = await self._where(db, dataset, query, filter)
            total = (await db.execute(select(func.count()).select_from(Record).where(where))).scalar() or 0
            stmt = select(Record.id).where(where)
            for clause in await self._order_by(db, dataset, sort or []):
                stmt = stmt.order_by(clause)
            stmt = stmt.order_by(Record.inserted_at.asc(), Record.id.asc()).offset(offset).limit(limit)
            ids = (await db.execute(stmt)).scalars().all()
        return SearchResponses(items=[SearchResponseItem(record_id=i, score=1.0) for i in ids], total=total)

    async def similarity_search(
        self,
        dataset: Dataset,
        vector_settings: VectorSettings,
        value: Optional[List[float]] = None,
        record: Optional[Record] = None,
        query: Optional[Union[TextQuery, str]] = None,
        filter: Optional[Filter] = None,
        max_results: int = 100,
        order: SimilarityOrder = SimilarityOrder.most_similar,
        threshold: Optional[float] = None,
    ) -> SearchResponses:
        if bool(value) == bool(record):
            raise ValueError("Must provide either vector value or record to compute the similarity search")
        excluded = None
        if not value:
            excluded = record.id
            value = record.vector_value_by_vector_settings(vector_settings)
        if not value:
            raise ValueError("Cannot find a vector value to apply with provided info")
        if order == SimilarityOrder.least_similar:
            value = [-x for x in value]
        async with AsyncSessionLocal() as db:
            where = await self._where(db, dataset, query, filter)
            stmt = (select(Record.id, Vector.value).join(Vector, Vector.record_id == Record.id)
                    .where(where, Vector.vector_settings_id == vector_settings.id))
            if excluded is not None:
                stmt = stmt.where(Record.id != excluded)
            rows = (await db.execute(stmt)).all()
        norm = math.sqrt(sum(x * x for x in value)) or 1.0
        scored = []
        for rid, vec in rows:
            vnorm = math.sqrt(sum(x * x for x in vec)) or 1.0
            cosine = sum(a * b for a, b in zip(value, vec)) / (norm * vnorm)
            scored.append(((1.0 + cosine) / 2.0, rid))  # Elasticsearch's score for cosine similarity
        scored.sort(key=lambda t: (-t[0], str(t[1])))
        scored = scored[:max_results]
        if threshold is not None:
            scored = [t for t in scored if t[0] >= threshold]
        return SearchResponses(items=[SearchResponseItem(record_id=rid, score=s) for s, rid in scored],
                               total=len(scored))

    # -------------------------------------------------------------- query building

    async def _where(self, db, dataset: Dataset, query, filter: Optional[Filter]) -> ColumnElement:
        conds = [Record.dataset_id == dataset.id]
        if query is not None:
            conds.append(await self._text_condition(db, dataset, query))
        if filter is not None:
            conds.append(await self._filter_condition(db, dataset, filter))
        return and_(*conds)

    async def _text_condition(self, db, dataset: Dataset, query) -> ColumnElement:
        if isinstance(query, str):
            query = TextQuery(q=query)
        if query.field:
            names = [query.field]
        else:
            names = list((await db.execute(select(Field.name).where(Field.dataset_id == dataset.id))).scalars())
        terms = _text_terms(query.q)
        if not terms or not names:
            return true()
        conds = []
        for negated, word, prefix in terms:
            pattern = _term_pattern(word, prefix)
            matched = or_(*[func.coalesce(_json_scalar(Record.fields, name), "").regexp_match(pattern)
                            for name in names])
            conds.append(not_(matched) if negated else matched)
        return and_(*conds)

    async def _filter_condition(self, db, dataset: Dataset, filter: Filter) -> ColumnElement:
        if isinstance(filter, AndFilter):
            return and_(true(), *[await self._filter_condition(db, dataset, f) for f in filter.filters])
        scope = filter.scope
        if isinstance(scope, RecordFilterScope):
            return self._record_condition(filter, scope.property)
        if isinstance(scope, MetadataFilterScope):
            return self._json_condition(filter, Record.metadata_, (scope.metadata_property,))
        if isinstance(scope, SuggestionFilterScope):
            question_id = await self._question_id(db, dataset, scope.question)
            prop = scope.property
            if prop in ("value", "score"):
                inner = self._json_condition(filter, getattr(Suggestion, prop), ())
            elif prop in ("agent", "type"):
                column = getattr(Suggestion, prop)
                inner = (column.in_(filter.values) if isinstance(filter, TermsFilter)
                         else self._range(column, filter.ge, filter.le))
            else:
                raise ValueError(f"Cannot process suggestion property {prop!r}")
            return exists(select(literal(1)).where(Suggestion.record_id == Record.id,
                                                   Suggestion.question_id == question_id, inner))
        if isinstance(scope, ResponseFilterScope):
            return self._response_condition(filter, scope)
        raise ValueError(f"Cannot process filter scope {scope}")

    @staticmethod
    def _range(column, ge, le) -> ColumnElement:
        conds = []
        if ge is not None:
            conds.append(column >= ge)
        if le is not None:
            conds.append(column <= le)
        return and_(true(), *conds)

    def _record_condition(self, filter: Filter, prop: str) -> ColumnElement:
        if prop in (RecordSortField.inserted_at.value, RecordSortField.updated_at.value):
            column = getattr(Record, prop)
            if isinstance(filter, RangeFilter):
                return self._range(column, _as_datetime(filter.ge), _as_datetime(filter.le))
            return column.in_([_as_datetime(v) for v in filter.values])
        if prop == "id":
            if isinstance(filter, RangeFilter):
                raise ValueError("A range filter on the record id is not supported")
            return Record.id.in_(_as_uuids(filter.values))
        if prop in ("external_id", "status"):
            column = getattr(Record, prop)
            if isinstance(filter, RangeFilter):
                return self._range(column, filter.ge, filter.le)
            return column.in_(filter.values)
        raise ValueError(f"Cannot process record property {prop!r}")

    def _json_condition(self, filter: Filter, column, keys: tuple) -> ColumnElement:
        if isinstance(filter, TermsFilter):
            return _any_value_in(column, keys, [str(v) for v in filter.values])
        if isinstance(filter, RangeFilter):
            return _any_value_in_range(column, keys, filter.ge, filter.le)
        raise ValueError(f"Cannot process filter {filter}")

    def _response_condition(self, filter: Filter, scope: ResponseFilterScope) -> ColumnElement:
        user_id = scope.user.id if scope.user is not None else None
        by_user = [Response.user_id == user_id] if user_id is not None else []
        if scope.question:
            inner = self._json_condition(filter, Response.values, (scope.question, "value"))
            return exists(select(literal(1)).where(Response.record_id == Record.id, inner, *by_user))
        if scope.property == "status" and isinstance(filter, TermsFilter):
            statuses = [str(v) for v in filter.values]
            conds = []
            if ResponseStatusFilter.pending.value in statuses:
                # pending: this user (or, without a user, nobody) has any response to the record
                conds.append(not_(exists(select(literal(1)).where(Response.record_id == Record.id, *by_user))))
            others = [s for s in statuses if s != ResponseStatusFilter.pending.value]
            if others:
                conds.append(exists(select(literal(1)).where(Response.record_id == Record.id,
                                                             Response.status.in_(others), *by_user)))
            return or_(false(), *conds)
        raise ValueError(f"Cannot process filter scope {scope}")

    async def _question_id(self, db, dataset: Dataset, name: str):
        qid = (await db.execute(select(Question.id).where(Question.dataset_id == dataset.id,
                                                          Question.name == name))).scalar()
        if qid is None:
            raise ValueError(f"Question {name!r} not found in dataset {dataset.id}")
        return qid

    async def _order_by(self, db, dataset: Dataset, sort: List[Order]) -> list:
        clauses = []
        for order in sort:
            scope = order.scope
            if isinstance(scope, RecordFilterScope):
                expr = getattr(Record, scope.property)
            elif isinstance(scope, MetadataFilterScope):
                expr = _json_scalar(Record.metadata_, scope.metadata_property)
            elif isinstance(scope, SuggestionFilterScope):
                question_id = await self._question_id(db, dataset, scope.question)
                column = getattr(Suggestion, scope.property)
                if scope.property in ("value", "score"):
                    column = func.json_extract(column, "$")
                expr = (select(column).where(Suggestion.record_id == Record.id, Suggestion.question_id == question_id)
                        .limit(1).scalar_subquery())
            elif isinstance(scope, ResponseFilterScope):
                key = scope.question or scope.property
                value = (Response.status if key == "status"
                         else func.json_extract(Response.values, _path(key, "value")))
                agg = func.min(value) if key == "status" else func.avg(value)
                conds = [Response.record_id == Record.id]
                if scope.user is not None:
                    conds.append(Response.user_id == scope.user.id)
                expr = select(agg).where(*conds).scalar_subquery()
            else:
                raise ValueError(f"Cannot sort by scope {scope}")
            descending = str(order.order) == SortOrder.desc.value
            # Elasticsearch puts missing values last in both directions.
            clauses.append(expr.is_(None))
            clauses.append(expr.desc() if descending else expr.asc())
        return clauses
