"""`sacctmgr` and `sshare` on a real corral server: the accounts its config keeps, and its own fair share."""

from __future__ import annotations

import getpass
import os

from tests.cli.slurm.goldens import golden
from tests.helpers import wait_for

ME = getpass.getuser()
REFUSED_ADD = (" Problem adding accounts: Access/permission denied\n corral keeps its accounts in the server's config.toml "
               "([accounts.NAME] members, coordinators; shares in [scheduler.shares]): an admin edits it there and "
               "restarts the server\n")


def _home_with(directory: str, config: str) -> str:
    home = os.path.join(directory, "accounts-home")
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(config)
    return home


def test_sacctmgr_lists_the_accounts_of_the_servers_config_as_slurm_does(server_factory, slurm_shell, short_tmp):
    home = _home_with(short_tmp, f'[accounts.vision]\nmembers = ["{ME}", "ada"]\ncoordinators = ["ada"]\n'
                                 f'[accounts.lab]\nmembers = ["{ME}"]\n[scheduler.shares]\n{ME} = 3\n')
    server = server_factory(home=home)
    shell = slurm_shell(server.home)
    # what snakemake's Slurm plugin asks to check an account: one per line, right-justified in 256 columns
    out = shell(f'sacctmgr -n -s list user "{ME}" format=account%256')
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{'lab':>256} \n{'vision':>256} \n"
    out = shell(f"sacctmgr list user {ME}; sacctmgr -P show assoc format=account,user,share,parentname; "
                "sacctmgr -p list user withcoord format=user,defaultaccount,coord")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        "      User   Def Acct     Admin \n"
        "---------- ---------- --------- \n"
        f"{ME:>10}        lab Administ+ \n"  # the first account by name is where a job without -A goes
        "Account|User|Share|ParentName\n"
        "root||1|\n"
        "lab||parent|root\n"  # accounts take no part in corral's fair share: Slurm's Fairshare=parent
        f"lab|{ME}|3|\n"
        "vision||parent|root\n"
        "vision|ada|1|\n"
        f"vision|{ME}|3|\n"
        "User|Def Acct|Coord Accounts|\n"
        "ada|vision|vision|\n"
        f"{ME}|lab||\n")
    out = shell("sacctmgr show assoc where user=ada format=account,user,bogus")
    assert (out.returncode, out.stdout, out.stderr) == (1, "", "Unknown field 'bogus'\n")
    out = shell("sacctmgr show user where bogus=1")
    assert (out.returncode, out.stderr) == (1, " Unknown condition: bogus=1\n Use keyword 'set' to modify value\n")


def test_sacctmgr_refuses_every_change_with_slurms_words_and_changes_nothing(server_factory, slurm_shell, slurm_path,
                                                                           short_tmp):
    home = _home_with(short_tmp, f'[accounts.vision]\nmembers = ["{ME}"]\n')
    server = server_factory(home=home)
    shell = slurm_shell(server.home)
    sacctmgr = os.path.join(slurm_path, "sacctmgr")  # corral's, never a real Slurm's found further on PATH
    out = shell(f"{sacctmgr} -i add account nlp")
    assert (out.returncode, out.stdout, out.stderr) == (1, "", REFUSED_ADD)
    out = shell(f"{sacctmgr} -i modify user {ME} set defaultaccount=nlp")
    assert out.returncode == 1
    assert out.stderr.startswith("sacctmgr: error: Your user doesn't have privilege to perform this action\n"
                                 " Error with request: Access/permission denied\n")
    assert shell(f"{sacctmgr} -i delete account vision").returncode == 1
    out = shell("sacctmgr -n -P show account format=account")
    assert out.stdout == "root\nvision\n"


def test_sshare_shows_corrals_own_fair_share_in_slurms_layout(server_factory, os_users, shared_dir, as_user):
    alice, bob = os_users
    home = _home_with(shared_dir, f'[accounts.vision]\nmembers = ["{alice}", "{bob}"]\n')
    os.chmod(home, 0o755)
    server = server_factory(gpus=1, home=home)
    client = server.client()
    used = as_user(alice, server.home, "sbatch --parsable --chdir=/tmp --gres=gpu:1 --wrap 'sleep 1'")
    assert used.returncode == 0, used.stderr
    assert client.wait(used.stdout.strip(), timeout=60)["state"] == "COMPLETED"
    holder = as_user(alice, server.home, "sbatch --parsable --chdir=/tmp --gres=gpu:1 -t 10 --wrap 'sleep 300'")
    waiting = as_user(bob, server.home, "sbatch --parsable --chdir=/tmp --gres=gpu:1 --wrap true")
    assert holder.returncode == 0 and waiting.returncode == 0, holder.stderr + waiting.stderr
    wait_for(lambda: client.get(holder.stdout.strip())["state"] == "RUNNING", timeout=60)
    wait_for(lambda: client.get(waiting.stdout.strip())["reason"] == "Resources", timeout=60)  # a pass saw it
    # alice has all the usage, bob a pending job: both counted, one share each, so S = 1/2 for each,
    # U = 1 for alice (F = 2^-2), 0 for bob (F = 1), whatever the seconds
    seen = as_user(bob, server.home, "sshare; echo --; sshare -a -P -l; echo --; sprio -n -h -o '%u %f'")
    assert seen.returncode == 0, seen.stderr
    mine, everyone, priority = seen.stdout.split("--\n")
    header, dashes, *lines = mine.splitlines()
    assert header == "Account                    User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare "
    columns = [_columns(line) for line in lines]  # bob's own line, and the accounts' (sshare shows them all)
    assert [c[:4] + c[5:] for c in columns] == [
        ["root", "", "", "1.000000", "1.000000", "0.500000"],
        [" vision", "", "parent", "1.000000", "1.000000", "0.500000"],
        ["  vision", bob, "1", "0.500000", "0.000000", "1.000000"]]
    assert int(columns[0][4]) == int(columns[1][4]) >= 1 and columns[2][4] == "0"
    rows = {tuple(line.split("|")[:2]): line.split("|") for line in everyone.splitlines()[1:]}
    alice_row, bob_row = rows[("  vision", alice)], rows[("  vision", bob)]
    assert alice_row[2:4] + alice_row[5:8] == ["1", "0.500000", "1.000000", "1.000000", "0.250000"]
    assert bob_row[2:] == ["1", "0.500000", "0", "0.000000", "0.000000", "1.000000", "",
                           "cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0"]
    assert int(alice_row[4]) >= 1  # GPU-seconds: the first job's second, and the running one's so far
    assert alice_row[9].split(",")[-1] in ("gres/gpu=9", "gres/gpu=10")  # the minutes left of its 10
    assert priority.split() == [bob, "1.0000000"]  # the factor sprio weighs is sshare's FairShare


def _columns(line: str) -> list[str]:
    """sshare's default columns of a line: Account (20, left), User, RawShares, NormShares, RawUsage,
    EffectvUsage, FairShare, each followed by a space."""
    out, at = [], 0
    for width in (20, 10, 10, 11, 11, 13, 10):
        cell = line[at:at + width]
        out.append(cell.rstrip() if at == 0 else cell.strip())
        at += width + 1
    return out


def test_command_lines_the_commands_refuse_are_refused_in_slurms_words(slurm_shell, slurm_path, short_tmp):
    shell = slurm_shell(os.path.join(short_tmp, "no-server"))  # read and refused before any server is asked
    sacctmgr = os.path.join(slurm_path, "sacctmgr")  # corral's, never a real Slurm's found further on PATH
    for script, name in (("sacctmgr -x show user", "sacctmgr_bad_option_err"),
                         ("sacctmgr bogus", "sacctmgr_bad_keyword_err"), ("sacctmgr show bogus", "sacctmgr_bad_entity_err"),
                         ("sacctmgr show", "sacctmgr_no_entity_err"),
                         ("sacctmgr show user where bogus=1", "sacctmgr_bad_cond_err"),
                         ("sacctmgr show assoc format=bogus", "sacctmgr_bad_field_err"),
                         ("sshare -x", "sshare_bad_option_err")):
        out = shell(script)
        assert (out.returncode, out.stdout, out.stderr) == (1, "", golden(f"{name}.txt")), script
    for script, name in ((f"{sacctmgr} -i add account foo", "sacctmgr_refused_add_account_err"),
                         (f"{sacctmgr} -i create user foo account=vision", "sacctmgr_refused_add_user_err"),
                         (f"{sacctmgr} -i add coordinator account=vision names=bob",
                          "sacctmgr_refused_add_coordinator_err"),
                         (f"{sacctmgr} -i modify user ada set defaultaccount=nlp", "sacctmgr_refused_modify_user_err"),
                         (f"{sacctmgr} -i delete user ada", "sacctmgr_refused_delete_user_err")):
        out = shell(script)  # Slurm's lines to a user without the privilege, then where corral keeps accounts
        assert (out.returncode, out.stdout) == (1, ""), script
        assert out.stderr == golden(f"{name}.txt") + REFUSED_ADD.splitlines(keepends=True)[1], script
    for script, name in (("sshare --help", "sshare_help"), ("sshare -e", "sshare_e")):
        out = shell(script)
        assert (out.returncode, out.stdout) == (0, golden(f"{name}.txt")), script
