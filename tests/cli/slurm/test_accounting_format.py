"""`sacctmgr` and `sshare` against the real Slurm 22.05.8's output (tests/cli/slurm/golden/), from the same
associations: the testbed's accounts nlp (bob, carol) and vision (ada, coordinator, and bob), root's user root.

The testbed runs priority/basic, so its figures are the unset ones (NormShares blank, usage 0, FairShare 1);
sshare was run with a client config adding `PriorityFlags=NO_FAIR_TREE` (classic fair share, corral's: it
decides sshare's columns, which the client picks), once with the accounts' shares at 1 (`sshare*.txt` but
`sshare_default.txt`, `sshare_a*.txt` but `_a_p`, `_a_n`, `_a_m`) and once at `parent`, as corral's are
(those, `sacctmgr_show_assoc.txt`, `sacctmgr_P_show_assoc.txt`, `sacctmgr_s_show_account.txt`,
`sacctmgr_show_assoc_widths.txt`). The lines with real figures are built from src/common/print_fields.c."""

from __future__ import annotations

from typing import Any

import pytest

from corral.cli.slurm.sacctmgr_format import listing
from corral.cli.slurm.sacctmgr_query import ConditionError, parse
from corral.cli.slurm.sshare_format import sshare_text
from tests.cli.slurm.goldens import golden

TRES0 = {k: 0 for k in ("cpu", "mem", "energy", "node", "billing", "fs/disk", "vmem", "pages")}


def _row(id: int, account: str, user: str | None, parent: str | None, pid: int | None, lft: int, rgt: int,
         shares: int | str, default: bool = False) -> dict[str, Any]:
    return {"id": id, "account": account, "user": user, "parent": parent, "parent_id": pid, "lft": lft, "rgt": rgt,
            "shares": shares, "norm_shares": None, "raw_usage": 0, "norm_usage": None, "effective_usage": 0.0,
            "fairshare": 1.0, "level_fs": None if shares == "parent" else 0.0, "is_default": default,
            "tres_run_mins": dict(TRES0), "grp_tres_raw": dict(TRES0)}


def _testbed(account_shares: int | str) -> dict[str, Any]:
    """The testbed's associations as corral's API gives them (its ids and nested-set bounds)."""
    return {
        "cluster": "corral", "qos": ["normal"], "default_qos": None,
        "accounts": [
            {"name": "root", "description": "default root account", "organization": "root", "coordinators": []},
            {"name": "nlp", "description": "nlp", "organization": "nlp", "coordinators": []},
            {"name": "vision", "description": "vision lab", "organization": "lab", "coordinators": ["ada"]}],
        "users": [{"name": "ada", "default_account": "vision", "admin": False, "coordinates": ["vision"]},
                  {"name": "bob", "default_account": "nlp", "admin": False, "coordinates": []},
                  {"name": "carol", "default_account": "nlp", "admin": False, "coordinates": []},
                  {"name": "root", "default_account": "root", "admin": True, "coordinates": []}],
        "associations": [
            _row(1, "root", None, None, None, 1, 16, 1), _row(2, "root", "root", "root", 1, 14, 15, 1, True),
            _row(4, "nlp", None, "root", 1, 2, 7, account_shares), _row(7, "nlp", "bob", "nlp", 4, 5, 6, 1, True),
            _row(8, "nlp", "carol", "nlp", 4, 3, 4, 1, True),
            _row(3, "vision", None, "root", 1, 8, 13, account_shares),
            _row(5, "vision", "ada", "vision", 3, 11, 12, 1, True), _row(6, "vision", "bob", "vision", 3, 9, 10, 1)],
    }


ONES, PARENT = _testbed(1), _testbed("parent")
MANY = ("Account,User,RawShares,NormShares,RawUsage,NormUsage,EffectvUsage,FairShare,LevelFS,ID,Cluster,Partition,"
        "GrpTRESMins,GrpTRESRaw,TRESRunMins,")

SSHARE = [  # golden file, the associations, sshare_text's arguments (what the command line gave)
    ("sshare.txt", ONES, {"users": ["root"]}),  # as root, without -a: every account, root's own line
    ("sshare_default.txt", PARENT, {"users": ["root"]}),
    ("sshare_a.txt", PARENT, {}),
    ("sshare_a_l.txt", PARENT, {"long": True}),
    ("sshare_a_P_l.txt", PARENT, {"long": True, "parsable": ""}),
    ("sshare_a_p.txt", ONES, {"parsable": "|"}),
    ("sshare_a_n.txt", ONES, {"noheader": True}),
    ("sshare_a_m.txt", ONES, {"partitions": True}),
    ("sshare_U.txt", ONES, {"users": ["root"], "users_only": True}),
    ("sshare_U_a.txt", ONES, {"users_only": True}),
    ("sshare_U_u_bob.txt", ONES, {"users": ["bob"], "users_only": True}),
    # what snakemake's Slurm plugin asks when sacctmgr says nothing: `sshare -U --format Account%256 --noheader`
    ("sshare_U_format_account256_noheader_bob.txt", ONES,
     {"users": ["bob"], "users_only": True, "fields": "Account%256,", "noheader": True}),
    ("sshare_u_bob.txt", ONES, {"users": ["bob"]}),
    ("sshare_u_ada_bob.txt", ONES, {"users": ["ada", "bob"]}),
    ("sshare_u_nobody.txt", ONES, {"users": ["nobody"]}),
    ("sshare_A_vision.txt", ONES, {"users": ["root"], "accounts": ["vision"]}),
    ("sshare_A_vision_a.txt", ONES, {"accounts": ["vision"]}),
    ("sshare_o_many.txt", ONES, {"fields": MANY}),
    ("sshare_o_widths.txt", ONES, {"fields": "account%-12,user%5,fairshare%12,rawusage%4,"}),
    ("sshare_o_abbrev.txt", ONES, {"fields": "acc,us,eff,fa,"}),
    ("sshare_o_levelfs.txt", PARENT, {"fields": "account,user,rawshares,levelfs,fairshare,"}),
]


@pytest.mark.parametrize(("name", "state", "options"), SSHARE, ids=[case[0] for case in SSHARE])
def test_sshare_is_slurms(name: str, state: dict[str, Any], options: dict[str, Any]) -> None:
    assert sshare_text(state["associations"], **options) == golden(name)


SACCTMGR = [  # golden file, the associations, the entity, the words after it, -s, the output options
    ("sacctmgr_list_user_ada.txt", ONES, "user", ["ada"], False, {}),
    ("sacctmgr_s_list_user_ada.txt", ONES, "user", ["ada"], True, {}),
    ("sacctmgr_show_user_ada_withassoc.txt", ONES, "user", ["ada", "withassoc"], False, {}),
    # what snakemake's Slurm plugin asks: `sacctmgr -n -s list user U format=account%256`
    ("sacctmgr_n_s_list_user_bob_format_account256.txt", ONES, "user", ["bob", "format=account%256"], True,
     {"noheader": True}),
    ("sacctmgr_n_s_list_user_bob_format_account30.txt", ONES, "user", ["bob", "format=account%30"], True,
     {"noheader": True}),
    ("sacctmgr_list_user.txt", ONES, "user", [], False, {}),
    ("sacctmgr_p_list_user.txt", ONES, "user", [], False, {"parsable": "|"}),
    ("sacctmgr_list_user_withcoord.txt", ONES, "user", ["withcoord"], False, {}),
    ("sacctmgr_P_s_list_user_bob.txt", ONES, "user", ["bob"], True, {"parsable": ""}),
    ("sacctmgr_list_user_bob_format.txt", ONES, "user", ["bob", "format=user,defaultaccount,admin,account"], False,
     {}),
    # fields that say nothing of a user print as Slurm prints a NULL: a number 0, a time 00:00:00
    ("sacctmgr_list_user_bob_null_fields.txt", ONES, "user",
     ["bob", "format=user,share,priority,account,maxjobs,grpwall,coord,qos"], False, {}),
    ("sacctmgr_list_user_nobody.txt", ONES, "user", ["nobody"], False, {}),
    ("sacctmgr_n_list_user_where_name_ada.txt", ONES, "user",
     ["where", "name=ada", "format=user%20,defaultaccount%-15"], False, {"noheader": True}),
    ("sacctmgr_show_assoc.txt", PARENT, "association", [], False, {}),
    ("sacctmgr_P_show_assoc.txt", PARENT, "association", ["format=account,user,share"], False, {"parsable": ""}),
    ("sacctmgr_show_assoc_tree.txt", ONES, "association", ["tree"], False, {}),
    ("sacctmgr_show_assoc_where_user_bob.txt", ONES, "association", ["where", "user=bob"], False, {}),
    ("sacctmgr_show_assoc_where_user_bob_ids.txt", ONES, "association",
     ["where", "user=bob", "format=account,user,count,lft,rgt,id,parentid,parentname"], False, {}),
    ("sacctmgr_P_show_assoc_format.txt", ONES, "association", ["format=account,user,share,parentname"], False,
     {"parsable": ""}),
    ("sacctmgr_P_show_assoc_all_ids.txt", ONES, "association", ["format=id,parentid,lft,rgt,account,user,parentname"],
     False, {"parsable": ""}),
    ("sacctmgr_p_show_assoc_where_account_vision.txt", ONES, "association",
     ["where", "account=vision", "format=cluster,account,user,partition,share"], False, {"parsable": "|"}),
    ("sacctmgr_show_assoc_widths.txt", PARENT, "association",
     ["format=account%-12,user,share%-12,qos%5,cluster%3"], False, {}),
    ("sacctmgr_show_account.txt", ONES, "account", [], False, {}),
    ("sacctmgr_s_show_account.txt", PARENT, "account", [], True, {}),
    ("sacctmgr_show_account_withcoord.txt", ONES, "account", ["withcoord"], False, {}),
    ("sacctmgr_show_account_null_fields.txt", ONES, "account", ["format=account,share,priority,user,qos"], False, {}),
]


@pytest.mark.parametrize(("name", "state", "entity", "words", "with_assocs", "options"), SACCTMGR,
                         ids=[case[0] for case in SACCTMGR])
def test_sacctmgr_is_slurms(name: str, state: dict[str, Any], entity: str, words: list[str], with_assocs: bool,
                            options: dict[str, Any]) -> None:
    assert listing(entity, state, parse(entity, words, with_assocs=with_assocs), **options) == golden(name)


def test_corrals_figures_print_as_slurm_prints_them() -> None:
    """Real figures, which the testbed (priority/basic) has none of: print_fields_double's `%*f`, `%e` when
    too wide, `inf`; the TRES run minutes cut to their column with a `+`."""
    association = {**_row(5, "vision", "ada", "vision", 3, 11, 12, 2, True), "norm_shares": 0.25,
                   "raw_usage": 7200, "norm_usage": 0.6, "effective_usage": 0.6, "fairshare": 2 ** (-0.6 / 0.25),
                   "level_fs": "inf", "tres_run_mins": {**TRES0, "cpu": 120, "gres/gpu": 60}}
    text = sshare_text([association], long=True)
    assert text.splitlines()[2] == (
        "vision                      ada          2    0.250000        7200    0.600000      0.600000   0.189465 "
        "                               cpu=120,mem=0,energy=0,node=0+ ")
    assert sshare_text([association], fields="levelfs,rawusage%3,fairshare%5,", noheader=True) == (
        "       inf 7200 1.894646e-01 \n")  # %5f is too wide, %5.5e too: C's %-1.-1e
    assert sshare_text([association], fields="TRESRunMins,", parsable="") == (
        "TRESRunMins\ncpu=120,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=60\n")


def test_unknown_fields_and_conditions_are_refused_in_slurms_words() -> None:
    with pytest.raises(ValueError, match=r'^Invalid field requested: "bogus"$'):
        sshare_text([], fields="Bogus,")
    with pytest.raises(ValueError, match=r"^Unknown field 'bogus'$"):
        listing("user", ONES, parse("user", ["format=user,bogus"]))
    with pytest.raises(ConditionError) as refused:
        parse("user", ["where", "bogus=1"])
    assert str(refused.value) + "\n" == golden("sacctmgr_bad_cond_err.txt")
    with pytest.raises(ConditionError, match=r"^ Unknown condition: bogus=1$"):
        parse("association", ["bogus=1"])
