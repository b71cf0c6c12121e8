"""The machine record a benchmark baseline carries, and when the verdict must say the baseline is from elsewhere."""

from harnessrl_jax import timing

HERE = {"cpu": "Intel(R) Xeon(R) Processor", "cores": 2, "matmul_gflops": 330.0, "read_gbs": 32.6}


def test_the_same_machine_within_the_tolerance_does_not_differ():
    there = dict(HERE, matmul_gflops=270.0, read_gbs=40.0)  # 18% and 23% away
    assert timing.machine_differences(there, HERE) == []


def test_each_difference_is_named():
    there = {"cpu": "AMD EPYC 9654", "cores": 4, "matmul_gflops": 470.4, "read_gbs": 52.0}
    out = timing.machine_differences(there, HERE)
    assert len(out) == 4
    assert out[0] == "cpu 'AMD EPYC 9654' there, 'Intel(R) Xeon(R) Processor' here"
    assert out[1] == "cores 4 there, 2 here"
    assert out[2] == "matmul 470.4 GFLOP/s there, 330.0 here"
    assert out[3] == "read 52.0 GB/s there, 32.6 here"


def test_a_rate_just_past_the_tolerance_differs_and_a_missing_record_differs():
    assert timing.machine_differences(dict(HERE, read_gbs=25.9), HERE) == ["read 25.9 GB/s there, 32.6 here"]
    assert timing.machine_differences(None, HERE) == ["the baseline does not record its machine"]
    assert timing.machine_differences(dict(HERE, matmul_gflops=None), HERE) == [
        "matmul None GFLOP/s there, 330.0 here"]


def test_cpu_model_reads_this_machine():
    model = timing.cpu_model()
    assert isinstance(model, str) and model
