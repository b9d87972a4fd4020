"""Which GPU faults drain a GPU and which are only recorded, and that each counts once (`corral.core.monitoring.gpu_health`)."""

from corral.core.monitoring.gpu_health import (
    FATAL, RECORDED, GpuStanding, HealthFigures, XidEvent, assess, drain_reason, fatal, throttle_names, xid_text,
)


def test_an_xid_that_means_a_broken_gpu_is_fatal_and_an_application_fault_is_only_recorded():
    figures = HealthFigures(xid_events=(XidEvent(79, 1_000), XidEvent(13, 2_000), XidEvent(48, 3_000)))
    _, events = assess(1, GpuStanding(), figures, now=100.0)
    assert [(e.severity, e.what) for e in events] == [
        (FATAL, "XID 79: GPU has fallen off the bus"), (RECORDED, "XID 13: graphics engine exception"),
        (FATAL, "XID 48: double-bit ECC error")]
    assert drain_reason(fatal(events)) == "XID 79: GPU has fallen off the bus; XID 48: double-bit ECC error"
    assert xid_text(154) == "XID 154"


def test_an_event_counts_once_however_often_it_is_read_again():
    """A replay cycles its frames, and a resumed GPU must not be drained again for what was already seen."""
    figures = HealthFigures(xid_events=(XidEvent(79, 1_000),))
    standing, first = assess(1, None, figures, now=1.0)
    standing, again = assess(1, standing, figures, now=2.0)
    assert [e.what for e in first] == ["XID 79: GPU has fallen off the bus"] and again == []
    _, later = assess(1, standing, HealthFigures(xid_events=(XidEvent(79, 9_000),)), now=3.0)
    assert [e.severity for e in later] == [FATAL]  # the same XID, later: a new event


def test_uncorrectable_ecc_errors_are_fatal_when_they_rise_not_for_the_count_found_at_start():
    standing, events = assess(0, None, HealthFigures(ecc_uncorrected=3), now=1.0)
    assert events == []  # from before the server looked: shown in the GPU's health, not acted on
    standing, events = assess(0, standing, HealthFigures(ecc_uncorrected=3), now=2.0)
    assert events == []
    standing, events = assess(0, standing, HealthFigures(ecc_uncorrected=5), now=3.0)
    assert [(e.severity, e.what) for e in events] == [(FATAL, "uncorrectable ECC errors: 5 (was 3)")]
    _, events = assess(0, standing, HealthFigures(ecc_uncorrected=None), now=4.0)  # unreadable: nothing new
    assert events == []


def test_a_lost_gpu_is_fatal_once_not_at_every_read_while_it_stays_lost():
    standing, events = assess(2, GpuStanding(), HealthFigures(lost=True), now=1.0)
    assert [e.severity for e in events] == [FATAL] and "fallen off the bus" in events[0].what
    standing, events = assess(2, standing, HealthFigures(lost=True), now=2.0)
    assert events == []
    standing, _ = assess(2, standing, HealthFigures(), now=3.0)
    _, events = assess(2, standing, HealthFigures(lost=True), now=4.0)
    assert len(events) == 1  # lost again after coming back: a new fault


def test_a_thermal_or_power_throttle_is_recorded_when_it_starts_and_idle_clocks_are_no_trouble():
    standing, events = assess(0, None, HealthFigures(throttle_reasons=0x1), now=1.0)  # GPU idle
    assert events == []
    standing, events = assess(0, standing, HealthFigures(throttle_reasons=0x40 | 0x4), now=2.0)
    assert [(e.severity, e.what) for e in events] == [(RECORDED, "throttled: power cap, thermal (hardware)")]
    standing, events = assess(0, standing, HealthFigures(throttle_reasons=0x40), now=3.0)
    assert events == []
    assert throttle_names(0x20 | 0x80 | 0x2) == ["thermal (software)", "power brake"]
