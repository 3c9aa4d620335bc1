"""Table labels read from records alone (no cell runs)."""

from dlbench.harness.output.tables import backend_label


def _record(backend, options):
    return {"backend": backend, "backend_version": "9.9", "context": {"options": options}}


def test_the_backend_label_names_every_option_off_its_default():
    # A switch that is on reads as its name, any other option as name=value; defaults
    # (cuda_graph off) are left out, so two rows differ in their label where they ran apart.
    rec = _record("pytorch", {"compile": "default", "cuda_graph": "off", "channels_last": "on"})
    assert backend_label(rec) == "pytorch 9.9 (compile=default, channels_last)"
    assert backend_label(_record("tensorflow", {"xla": "off", "eager": "on"})) == "tensorflow 9.9 (eager)"
    mkl = _record("cpu-mkl", {"onednn": "off", "kmp_blocktime": None})
    assert backend_label(mkl) == "cpu-mkl 9.9 (onednn=off)"
    assert backend_label(_record("onnxruntime", {})) == "onnxruntime 9.9"
    # A record from a plugin's backend that is not installed here keeps its plain label.
    assert backend_label(_record("someplugin", {"turbo": "on"})) == "someplugin 9.9"
