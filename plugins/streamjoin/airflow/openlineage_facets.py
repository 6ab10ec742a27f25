""":class:`~streamjoin.core.lineage.SpecLineage` as the OpenLineage provider's ``OperatorLineage``.

Imports the provider: only the operators' OpenLineage methods import this module.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attr
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import Dataset
from openlineage.client.facet_v2 import JobFacet, schema_dataset

from streamjoin.core.lineage import DatasetRef, SpecLineage

#: _schemaURL of the join facet: a URN (no schema is published; the fields are those of lineage.join_facts)
JOIN_FACET_SCHEMA = "urn:streamjoin:facets:StreamJoinJobFacet:1-0-0"


@attr.define
class StreamJoinJobFacet(JobFacet):
    """The join a task runs, as the spec declares it (``streamjoin_join`` in the job's facets)."""

    pipeline: str
    shape: str
    kind: str
    #: ``streaming`` (the continuous job) or ``batch`` (a reprocessed day)
    processing: str
    join: dict[str, Any]

    _additional_skip_redact: ClassVar[list[str]] = ["pipeline", "shape", "kind", "processing", "join"]

    @staticmethod
    def _get_schema() -> str:
        return JOIN_FACET_SCHEMA


def operator_lineage(lineage: SpecLineage, *, streaming: bool) -> OperatorLineage:
    """Datasets and the join facet of one task (``streaming``: the continuous job, else a batch recompute).
    The provider adds its own job facets (``jobType``, ``documentation``, ...), which take precedence."""
    return OperatorLineage(
        inputs=[_dataset(d) for d in lineage.inputs],
        outputs=[_dataset(d) for d in lineage.outputs],
        job_facets={
            "streamjoin_join": StreamJoinJobFacet(
                pipeline=lineage.join["pipeline"],
                shape=lineage.join["shape"],
                kind=lineage.join["kind"],
                processing="streaming" if streaming else "batch",
                join=lineage.join,
            ),
        },
    )


def _dataset(ref: DatasetRef) -> Dataset:
    """A dataset, with its schema facet where its fields are known."""
    if not ref.fields:
        return Dataset(namespace=ref.namespace, name=ref.name)
    schema = schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name=name, type=kind) for name, kind in ref.fields]
    )
    return Dataset(namespace=ref.namespace, name=ref.name, facets={"schema": schema})
