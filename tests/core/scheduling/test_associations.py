"""The association tree sacctmgr and sshare show: corral's accounts, and each user's figures corral's own fair share."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from corral.core.scheduling.associations import RunningUse, accounting_users, association_tree, default_account
from corral.core.access.identity import Account
from corral.core.scheduling.priority import fairshare_factors

ACCOUNTS = {"vision": Account("vision", frozenset({"ada", "bob"}), frozenset({"ada"})),
            "nlp": Account("nlp", frozenset({"bob", "carol"}))}


def _tree(**kwargs):
    arguments = {"accounts": ACCOUNTS, "users": [], "shares": {}, "usage": {}, "counted": [], **kwargs}
    return {(a.account, a.user): a for a in association_tree(**arguments)}


def test_the_tree_is_root_its_users_then_each_account_and_its_users_as_slurm_sorts_it():
    tree = association_tree(accounts=ACCOUNTS, users=["dan", "ada"], shares={}, usage={}, counted=[])
    assert [(a.account, a.user, a.parent) for a in tree] == [
        ("root", None, None), ("root", "dan", "root"),  # in no account: their jobs go to none, Slurm's root
        ("nlp", None, "root"), ("nlp", "bob", "nlp"), ("nlp", "carol", "nlp"),
        ("vision", None, "root"), ("vision", "ada", "vision"), ("vision", "bob", "vision")]
    assert [(a.id, a.parent_id, a.lft, a.rgt) for a in tree] == [
        (1, None, 1, 16), (2, 1, 2, 3), (3, 1, 4, 9), (4, 3, 5, 6), (5, 3, 7, 8), (6, 1, 10, 15), (7, 6, 11, 12),
        (8, 6, 13, 14)]
    assert [a.shares for a in tree if a.user is None] == [1, None, None]  # accounts are Fairshare=parent
    assert [(a.account, a.user) for a in tree if a.is_default] == [
        ("root", "dan"), ("nlp", "bob"), ("nlp", "carol"), ("vision", "ada")]  # bob's: the first by name


def test_a_users_figures_are_corrals_fair_share_wherever_the_user_sits():
    usage = {"ada": 1.0, "bob": 3.0}  # decayed GPU-hours
    tree = _tree(shares={"ada": 2}, usage=usage, counted=["carol"])  # carol waits, counted beside ada and bob
    factors = fairshare_factors(usage, {"carol"}, {"ada": 2})
    ada, bob, carol = tree[("vision", "ada")], tree[("nlp", "bob")], tree[("nlp", "carol")]
    assert (ada.shares, ada.norm_shares, ada.raw_usage, ada.norm_usage, ada.effective_usage) == (2, 0.5, 3600, 0.25,
                                                                                               0.25)
    assert math.isclose(ada.fairshare, 2 ** (-0.25 / 0.5)) and ada.fairshare == factors["ada"]
    assert bob.fairshare == factors["bob"] == tree[("vision", "bob")].fairshare  # one user, one figure
    assert (carol.norm_shares, carol.fairshare, carol.level_fs) == (0.25, 1.0, math.inf)
    assert math.isclose(ada.level_fs or 0.0, 0.5 / 0.25)


def test_a_user_fair_share_does_not_count_yet_gets_what_they_would_get_on_submitting():
    tree = _tree(users=["dan"], usage={"ada": 1.0}, counted=["bob"], shares={"dan": 2})
    dan = tree[("root", "dan")]
    assert (dan.norm_shares, dan.effective_usage, dan.fairshare) == (2 / 4, 0.0, 1.0)  # 2 of ada's, bob's and his 2
    assert tree[("vision", "ada")].norm_shares == 0.5  # the others' figures are the scheduler's


def test_accounts_add_up_their_users_and_root_holds_everything():
    tree = _tree(usage={"ada": 1.0, "bob": 3.0})
    root, nlp, vision = tree[("root", None)], tree[("nlp", None)], tree[("vision", None)]
    assert (root.raw_usage, root.norm_usage, root.effective_usage, root.norm_shares, root.fairshare) == (
        14400, 1.0, 1.0, 1.0, 0.5)
    assert (nlp.raw_usage, nlp.norm_usage, nlp.effective_usage, nlp.norm_shares) == (10800, 0.75, 0.75, 1.0)
    assert math.isclose(nlp.fairshare, 2 ** -0.75) and nlp.level_fs is None
    assert vision.raw_usage == 14400 and vision.norm_usage == 1.0  # bob counts in both of his accounts


def test_tres_run_minutes_are_what_running_jobs_hold_for_the_rest_of_their_time_limits():
    running = [RunningUse("ada", "vision", cpus=4, mem_mb=1000, nodes=1, gpus=2, remaining_s=600),
               RunningUse("bob", "nlp", cpus=1, mem_mb=100, nodes=1, gpus=0, remaining_s=120),
               RunningUse("bob", None, cpus=8, mem_mb=100, nodes=1, gpus=8, remaining_s=None)]  # no limit: nothing
    tree = _tree(running=running)
    assert tree[("vision", "ada")].tres_run_mins == {"cpu": 40, "mem": 10000, "energy": 0, "node": 10,
                                                     "billing": 40, "fs/disk": 0, "vmem": 0, "pages": 0,
                                                     "gres/gpu": 20}
    assert tree[("vision", "bob")].tres_run_mins["cpu"] == 0 and tree[("nlp", "bob")].tres_run_mins["cpu"] == 2
    assert tree[("nlp", None)].tres_run_mins["cpu"] == 2 and tree[("root", None)].tres_run_mins["cpu"] == 42


def test_users_know_their_default_account_what_they_coordinate_and_whether_they_administer():
    tree = association_tree(accounts=ACCOUNTS, users=["root"], shares={}, usage={}, counted=[])
    users = {u.name: u for u in accounting_users(tree, ACCOUNTS, admins=["root"])}
    assert [(u.name, u.default_account, u.admin, u.coordinates) for u in users.values()] == [
        ("ada", "vision", False, ("vision",)), ("bob", "nlp", False, ()), ("carol", "nlp", False, ()),
        ("root", "root", True, ())]
    assert default_account("eve", ACCOUNTS) == "root"


@settings(max_examples=200, deadline=None)
@given(usage=st.dictionaries(st.sampled_from(["ada", "bob", "carol", "dan"]), st.floats(0, 1e6)),
       counted=st.sets(st.sampled_from(["ada", "bob", "carol", "dan"])),
       shares=st.dictionaries(st.sampled_from(["ada", "bob", "carol", "dan"]), st.integers(1, 100)))
def test_every_counted_users_fairshare_is_the_schedulers_factor(usage, counted, shares):
    tree = association_tree(accounts=ACCOUNTS, users=["dan"], shares=shares, usage=usage, counted=counted)
    factors = fairshare_factors(usage, counted, shares)
    for association in tree:
        if association.user in factors:
            assert association.fairshare == factors[association.user]
        assert 0.0 <= association.fairshare <= 1.0 and 0.0 <= association.norm_usage <= 1.0
