"""sacctmgr's field table (src/sacctmgr/common.c `_get_print_field`), in its order: `format=` names are matched
against it as Slurm matches them, the first entry one of whose names starts with what was asked, at least as
many letters as that name needs.

Each entry: `(names, key, header, width, kind)`. `names` are `(name, letters needed)`; `key` what the value is
looked up by; kinds as `corral.cli.slurm.print_fields`'s (`s` text, `u` number, `f` double) and `t` a time
(never cut).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    Entry = tuple[Sequence[tuple[str, int]], str, str, int, str]

TABLE: tuple[Entry, ...] = (
    ((("Account", 3), ("Acct", 4)), "account", "Account", 10, "s"),
    ((("ActionRaw", 7),), "actionraw", "ActionRaw", 10, "u"),
    ((("Action", 4),), "action", "Action", 20, "s"),
    ((("Actor", 4),), "actor", "Actor", 10, "s"),
    ((("AdminLevel", 2),), "admin", "Admin", 9, "s"),
    ((("Allowed", 2),), "allowed", "% Allowed", 10, "u"),
    ((("Associations", 2),), "assocs", "Assocs", 10, "s"),
    ((("TRES", 2),), "tres", "TRES", 20, "s"),
    ((("Classification", 3),), "class", "Class", 9, "s"),
    ((("ClusterNodes", 8),), "cluster_nodes", "Cluster Nodes", 20, "s"),
    ((("Clusters", 2),), "cluster", "Cluster", 10, "s"),
    ((("Coordinators", 2),), "coordinators", "Coord Accounts", 20, "s"),
    ((("ControlHost", 8),), "control_host", "ControlHost", 15, "s"),
    ((("ControlPort", 8),), "control_port", "ControlPort", 12, "u"),
    ((("Count", 3),), "count", "Count", 6, "u"),
    ((("CountAllowed", 6),), "count_allowed", "# Allowed", 10, "u"),
    ((("CountUsed", 6),), "count_used", "# Used", 10, "u"),
    ((("CPUCount", 2),), "cpu_count", "CPU Cnt", 7, "s"),
    ((("DefaultAccount", 8),), "default_account", "Def Acct", 10, "s"),
    ((("DefaultQOS", 8),), "default_qos", "Def QOS", 9, "s"),
    ((("DefaultWCKey", 8),), "default_wckey", "Def WCKey", 10, "s"),
    ((("Description", 3),), "description", "Descr", 20, "s"),
    ((("Duration", 2),), "duration", "Duration", 13, "t"),
    ((("EventRaw", 6),), "eventraw", "EventRaw", 8, "u"),
    ((("Event", 2),), "event", "Event", 7, "s"),
    ((("Features", 3),), "features", "Features", 20, "s"),
    ((("Federation", 3),), "federation", "Federation", 10, "s"),
    ((("FedState", 4),), "fedstate", "FedState", 12, "s"),
    ((("FedStateRaw", 9),), "fedstateraw", "FedStateRaw", 11, "u"),
    ((("Flags", 2),), "flags", "Flags", 20, "s"),
    ((("GraceTime", 3),), "grace_time", "GraceTime", 10, "t"),
    ((("GrpCPUs", 6),), "grp_cpus", "GrpCPUs", 8, "u"),
    ((("GrpCPUMins", 7),), "grp_cpu_mins", "GrpCPUMins", 11, "u"),
    ((("GrpCPURunMins", 7),), "grp_cpu_run_mins", "GrpCPURunMins", 13, "u"),
    ((("GrpTRES", 7),), "grp_tres", "GrpTRES", 13, "s"),
    ((("GrpTRESMins", 7),), "grp_tres_mins", "GrpTRESMins", 13, "s"),
    ((("GrpTRESRunMins", 7),), "grp_tres_run_mins", "GrpTRESRunMins", 13, "s"),
    ((("GrpJobs", 4),), "grp_jobs", "GrpJobs", 7, "u"),
    ((("GrpJobsAccrue", 8),), "grp_jobs_accrue", "GrpJobsAccrue", 13, "u"),
    ((("GrpMemory", 4),), "grp_mem", "GrpMem", 7, "u"),
    ((("GrpNodes", 4),), "grp_nodes", "GrpNodes", 8, "u"),
    ((("GrpSubmitJobs", 4),), "grp_submit", "GrpSubmit", 9, "u"),
    ((("GrpWall", 4),), "grp_wall", "GrpWall", 11, "t"),
    ((("ID", 2),), "id", "ID", 6, "u"),
    ((("Info", 2),), "info", "Info", 20, "s"),
    ((("LFT", 1),), "lft", "LFT", 6, "u"),
    ((("servertype", 10),), "server_type", "ServerType", 10, "s"),
    ((("MaxCPUMinsPerJob", 7),), "max_cpu_mins", "MaxCPUMins", 11, "u"),
    ((("MaxCPURunMinsPerUser", 7), ("MaxCPURunMinsPU", 7)), "max_cpu_run_mins", "MaxCPURunMinsPU", 15, "u"),
    ((("MaxCPUsPerJob", 7),), "max_cpus", "MaxCPUs", 8, "u"),
    ((("MaxCPUsPerUser", 11), ("MaxCPUsPU", 9)), "max_cpus_pu", "MaxCPUsPU", 9, "u"),
    ((("MaxTRES", 7), ("MaxTRESPerJob", 11)), "max_tres", "MaxTRES", 13, "s"),
    ((("MaxTRESPerNode", 11),), "max_tres_pn", "MaxTRESPerNode", 14, "s"),
    ((("MaxTRESMinsPerJob", 8),), "max_tres_mins", "MaxTRESMins", 13, "s"),
    ((("MaxTRESRunMinsPerAccount", 18), ("MaxTRESRunMinsPerAcct", 18), ("MaxTRESRunMinsPA", 15)),
     "max_tres_run_mins_pa", "MaxTRESRunMinsPA", 15, "s"),
    ((("MaxTRESRunMinsPerUser", 8), ("MaxTRESRunMinsPU", 8)), "max_tres_run_mins", "MaxTRESRunMinsPU", 15, "s"),
    ((("MaxTRESPerAccount", 11), ("MaxTRESPerAcct", 11), ("MaxTRESPA", 9)), "max_tres_pa", "MaxTRESPA", 13, "s"),
    ((("MaxTRESPerUser", 11), ("MaxTRESPU", 9)), "max_tres_pu", "MaxTRESPU", 13, "s"),
    ((("MaxJobs", 4),), "max_jobs", "MaxJobs", 7, "u"),
    ((("MaxJobsAccrue", 4),), "max_jobs_accrue", "MaxJobsAccrue", 13, "u"),
    ((("MaxJobsAccruePerAccount", 17), ("MaxJobsAccruePerAcct", 17), ("MaxJobsAccruePA", 15)),
     "max_jobs_accrue_pa", "MaxJobsAccruePA", 15, "u"),
    ((("MaxJobsAccruePerUser", 17), ("MaxJobsAccruePU", 15)), "max_jobs_accrue_pu", "MaxJobsAccruePU", 15, "u"),
    ((("MaxJobsPerAccount", 11), ("MaxJobsPerAcct", 11), ("MaxJobsPA", 9)), "max_jobs_pa", "MaxJobsPA", 9, "u"),
    ((("MaxJobsPerUser", 11), ("MaxJobsPU", 9)), "max_jobs", "MaxJobsPU", 9, "u"),
    ((("MaxNodesPerJob", 4),), "max_nodes", "MaxNodes", 8, "u"),
    ((("MaxNodesPerUser", 12), ("MaxNodesPU", 10)), "max_nodes_pu", "MaxNodesPU", 10, "u"),
    ((("MinPrioThreshold", 4),), "min_prio_thresh", "MinPrioThres", 12, "u"),
    ((("MaxSubmitJobs", 4),), "max_submit", "MaxSubmit", 9, "u"),
    ((("MaxSubmitJobsPerAccount", 17), ("MaxSubmitJobsPerAcct", 17), ("MaxSubmitJobsPA", 15), ("MaxSubmitPA", 11)),
     "max_submit_pa", "MaxSubmitPA", 11, "u"),
    ((("MaxSubmitJobsPerUser", 10), ("MaxSubmitJobsPU", 10), ("MaxSubmitPU", 6)), "max_submit", "MaxSubmitPU", 11,
     "u"),
    ((("MaxWallDurationPerJob", 4),), "max_wall", "MaxWall", 11, "t"),
    ((("MinCPUsPerJob", 7),), "min_cpus", "MinCPUs", 8, "u"),
    ((("MinTRESPerJob", 7),), "min_tres", "MinTRES", 13, "s"),
    ((("Name", 2),), "name", "Name", 10, "s"),
    ((("NodeCount", 5),), "node_count", "NodeCount", 9, "u"),
    ((("NodeInx", 5),), "node_inx", "NodeInx", 9, "s"),
    ((("NodeNames", 5),), "node_names", "NodeName", -15, "s"),
    ((("Organization", 1),), "organization", "Org", 20, "s"),
    ((("ParentID", 7),), "parent_id", "ParentID", 8, "u"),
    ((("ParentName", 7),), "parent_name", "ParentName", 10, "s"),
    ((("Partition", 4),), "partition", "Partition", 10, "s"),
    ((("PluginIDSelect", 2),), "plugin_id_select", "PluginIDSelect", 14, "u"),
    ((("PreemptMode", 8),), "preempt_mode", "PreemptMode", 11, "s"),
    ((("Preempt", 7),), "preempt", "Preempt", 10, "s"),
    ((("PreemptExemptTime", 8),), "preempt_exempt_time", "PreemptExemptTime", 19, "t"),
    ((("Priority", 3),), "priority", "Priority", 10, "u"),
    ((("Problem", 1),), "problem", "Problem", 40, "s"),
    ((("QOSLevel", 3),), "qos", "QOS", 20, "s"),
    ((("QOSRAWLevel", 4),), "qos_raw", "QOS_RAW", 10, "s"),
    ((("Reason", 1),), "reason", "Reason", 30, "s"),
    ((("RGT", 1),), "rgt", "RGT", 6, "u"),
    ((("RPC", 1),), "rpc", "RPC", 5, "u"),
    ((("Server", 3),), "server", "Server", 10, "s"),
    ((("Share", 1), ("FairShare", 2)), "shares", "Share", 9, "u"),
    ((("StateRaw", 6),), "state_raw", "StateRaw", 8, "u"),
    ((("State", 1),), "state", "State", 6, "s"),
    ((("TimeStamp", 2),), "time", "Time", 19, "s"),
    ((("TimeEligible", 6), ("Eligible", 2)), "time_eligible", "TimeEligible", 19, "s"),
    ((("TimeEnd", 6), ("End", 2)), "time_end", "TimeEnd", 19, "s"),
    ((("TimeStart", 7), ("Start", 3)), "time_start", "TimeStart", 19, "s"),
    ((("TimeSubmit", 6), ("Submit", 2)), "time_submit", "TimeSubmit", 19, "s"),
    ((("TRES", 2),), "tres", "TRES", 20, "s"),
    ((("Type", 2),), "type", "Type", 8, "s"),
    ((("UnusedWall", 2),), "unused_wall", "UnusedWall", 10, "f"),
    ((("UsageFactor", 6),), "usage_factor", "UsageFactor", 11, "f"),
    ((("UsageThreshold", 6),), "usage_threshold", "UsageThres", 10, "f"),
    ((("LimitFactor", 6),), "limit_factor", "LimitFactor", 11, "f"),
    ((("Allocated", 7),), "allocated", "% Allocated", 11, "u"),
    ((("User", 1),), "user", "User", 10, "s"),
    ((("WCKeys", 2),), "wckeys", "WCKeys", 20, "s"),
    ((("Where", 2),), "where", "Where", 20, "s"),
)


def matches(asked: str, name: str, letters: int) -> bool:
    """Slurm's `!xstrncasecmp(name, asked, MAX(strlen(asked), letters))`: `asked` starts `name`, at least
    `letters` long."""
    return letters <= len(asked) <= len(name) and name.lower().startswith(asked.lower())


def lookup(asked: str) -> tuple[str, str, int, str] | None:
    """`(key, header, width, kind)` of the field `asked` names (its `%N` already taken off), or None."""
    for names, key, header, width, kind in TABLE:
        if any(matches(asked, name, letters) for name, letters in names):
            return key, header, width, kind
    return None
