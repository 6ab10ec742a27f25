"""A demo DAG per example pipeline under include/pipelines/ that ships sample data (include/examples/, seed
000's in streamjoin.demo.sample): reset, provision, produce the sample on yesterday, run the join until the
sample is consumed, reprocess the day, check its quality, report. `make demo` runs the seed's."""

from streamjoin.airflow.dag_factory import spec_paths
from streamjoin.airflow.demo_dag import demo_dag
from streamjoin.core.plans import resolve
from streamjoin.core.spec import load_spec
from streamjoin.demo.sample import has_demo

for _path in spec_paths():
    if has_demo(load_spec(resolve(_path))):
        _dag = demo_dag(_path)
        globals()[_dag.dag_id] = _dag
