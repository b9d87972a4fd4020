"""`scontrol show config`: Slurm 22.05's `Key = Value` rows in its order, with corral's values where it has them."""

from __future__ import annotations

from corral.cli.slurm.scontrol_format import NULL, SLURM_VERSION
from corral.cli.slurm.values import local_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# Slurm 22.05's rows, in its order, with its defaults (as a plain single-node cluster shows them);
# `show_config` fills in what corral knows. The priority rows are priority/multifactor's, which is
# what corral computes.
_CONFIG_ROWS = (
    ("AccountingStorageBackupHost", NULL), ("AccountingStorageEnforce", "none"),
    ("AccountingStorageHost", "localhost"), ("AccountingStorageExternalHost", NULL),
    ("AccountingStorageParameters", NULL), ("AccountingStoragePort", "0"),
    ("AccountingStorageTRES", "cpu,mem,energy,node,billing,fs/disk,vmem,pages,gres/gpu"),
    ("AccountingStorageType", "accounting_storage/none"), ("AccountingStorageUser", "N/A"),
    ("AccountingStoreFlags", NULL), ("AcctGatherEnergyType", "acct_gather_energy/none"),
    ("AcctGatherFilesystemType", "acct_gather_filesystem/none"),
    ("AcctGatherInterconnectType", "acct_gather_interconnect/none"), ("AcctGatherNodeFreq", "0 sec"),
    ("AcctGatherProfileType", "acct_gather_profile/none"), ("AllowSpecResourcesUsage", "No"),
    ("AuthAltTypes", NULL), ("AuthAltParameters", NULL), ("AuthInfo", NULL), ("AuthType", "auth/munge"),
    ("BatchStartTimeout", "10 sec"), ("BcastExclude", "/lib,/usr/lib,/lib64,/usr/lib64"),
    ("BcastParameters", NULL), ("BOOT_TIME", "Unknown"), ("BurstBufferType", NULL),
    ("CliFilterPlugins", NULL), ("ClusterName", "corral"), ("CommunicationParameters", NULL),
    ("CompleteWait", "0 sec"), ("CoreSpecPlugin", "core_spec/none"), ("CpuFreqDef", "Unknown"),
    ("CpuFreqGovernors", "OnDemand,Performance,UserSpace"), ("CredType", "cred/munge"), ("DebugFlags", NULL),
    ("DefMemPerNode", "UNLIMITED"), ("DependencyParameters", NULL), ("DisableRootJobs", "No"),
    ("EioTimeout", "60"), ("EnforcePartLimits", "NO"), ("Epilog", NULL), ("EpilogMsgTime", "2000 usec"),
    ("EpilogSlurmctld", NULL), ("ExtSensorsType", "ext_sensors/none"), ("ExtSensorsFreq", "0 sec"),
    ("FederationParameters", NULL), ("FirstJobId", "1"), ("GetEnvTimeout", "2 sec"), ("GresTypes", "gpu"),
    ("GpuFreqDef", "high,memory=high"), ("GroupUpdateForce", "1"), ("GroupUpdateTime", "600 sec"),
    ("HASH_VAL", "Match"), ("HealthCheckInterval", "0 sec"), ("HealthCheckNodeState", "ANY"),
    ("HealthCheckProgram", NULL), ("InactiveLimit", "0 sec"),
    ("InteractiveStepOptions", "--interactive --preserve-env --pty $SHELL"),
    ("JobAcctGatherFrequency", "30"), ("JobAcctGatherType", "jobacct_gather/linux"),
    ("JobAcctGatherParams", NULL), ("JobCompHost", "localhost"), ("JobCompLoc", "/var/log/slurm_jobcomp.log"),
    ("JobCompPort", "0"), ("JobCompType", "jobcomp/none"), ("JobCompUser", "root"),
    ("JobContainerType", "job_container/none"), ("JobCredentialPrivateKey", NULL),
    ("JobCredentialPublicCertificate", NULL), ("JobDefaults", NULL), ("JobFileAppend", "0"),
    ("JobRequeue", "1"), ("JobSubmitPlugins", NULL), ("KillOnBadExit", "0"), ("KillWait", "30 sec"),
    ("LaunchParameters", NULL), ("LaunchType", "launch/slurm"), ("Licenses", NULL),
    ("LogTimeFormat", "iso8601_ms"), ("MailDomain", NULL), ("MailProg", "/bin/mail"),
    ("MaxArraySize", "1001"), ("MaxDBDMsgs", "20004"), ("MaxJobCount", "10000"), ("MaxJobId", "67043328"),
    ("MaxMemPerNode", "UNLIMITED"), ("MaxNodeCount", "1"), ("MaxStepCount", "40000"),
    ("MaxTasksPerNode", "512"), ("MCSPlugin", "mcs/none"), ("MCSParameters", NULL),
    ("MessageTimeout", "10 sec"), ("MinJobAge", "300 sec"), ("MpiDefault", "none"), ("MpiParams", NULL),
    ("NEXT_JOB_ID", "1"), ("NodeFeaturesPlugins", NULL), ("OverTimeLimit", "0 min"),
    ("PluginDir", "/usr/lib/x86_64-linux-gnu/slurm-wlm"), ("PlugStackConfig", NULL),
    ("PowerParameters", NULL), ("PowerPlugin", ""), ("PreemptMode", "OFF"), ("PreemptType", "preempt/none"),
    ("PreemptExemptTime", "00:00:00"), ("PrEpParameters", NULL), ("PrEpPlugins", "prep/script"),
    ("PriorityParameters", NULL), ("PrioritySiteFactorParameters", NULL), ("PrioritySiteFactorPlugin", NULL),
    ("PriorityDecayHalfLife", "7-00:00:00"), ("PriorityCalcPeriod", "00:05:00"), ("PriorityFavorSmall", "No"),
    ("PriorityFlags", ""), ("PriorityMaxAge", "7-00:00:00"), ("PriorityUsageResetPeriod", "NONE"),
    ("PriorityType", "priority/multifactor"), ("PriorityWeightAge", "0"), ("PriorityWeightAssoc", "0"),
    ("PriorityWeightFairShare", "0"), ("PriorityWeightJobSize", "0"), ("PriorityWeightPartition", "0"),
    ("PriorityWeightQOS", "0"), ("PriorityWeightTRES", NULL),
    ("PrivateData", "none"), ("ProctrackType", "proctrack/linuxproc"), ("Prolog", NULL),
    ("PrologEpilogTimeout", "65534"), ("PrologSlurmctld", NULL), ("PrologFlags", NULL),
    ("PropagatePrioProcess", "0"), ("PropagateResourceLimits", "ALL"),
    ("PropagateResourceLimitsExcept", NULL), ("RebootProgram", NULL), ("ReconfigFlags", NULL),
    ("RequeueExit", NULL), ("RequeueExitHold", NULL), ("ResumeFailProgram", NULL), ("ResumeProgram", NULL),
    ("ResumeRate", "300 nodes/min"), ("ResumeTimeout", "60 sec"), ("ResvEpilog", NULL),
    ("ResvOverRun", "0 min"), ("ResvProlog", NULL), ("ReturnToService", "1"), ("RoutePlugin", "route/default"),
    ("SchedulerParameters", NULL), ("SchedulerTimeSlice", "30 sec"), ("SchedulerType", "sched/backfill"),
    ("ScronParameters", NULL), ("SelectType", "select/cons_tres"), ("SelectTypeParameters", "CR_CORE_MEMORY"),
    ("SlurmUser", "root(0)"), ("SlurmctldAddr", NULL), ("SlurmctldDebug", "info"),
    ("SlurmctldHost[0]", "localhost"), ("SlurmctldLogFile", NULL), ("SlurmctldPort", "6817"),
    ("SlurmctldSyslogDebug", NULL), ("SlurmctldPrimaryOffProg", NULL), ("SlurmctldPrimaryOnProg", NULL),
    ("SlurmctldTimeout", "120 sec"), ("SlurmctldParameters", NULL), ("SlurmdDebug", "info"),
    ("SlurmdLogFile", NULL), ("SlurmdParameters", NULL), ("SlurmdPidFile", "/run/slurmd.pid"),
    ("SlurmdPort", "6818"), ("SlurmdSpoolDir", "/var/spool/slurmd"), ("SlurmdSyslogDebug", NULL),
    ("SlurmdTimeout", "300 sec"), ("SlurmdUser", "root(0)"), ("SlurmSchedLogFile", NULL),
    ("SlurmSchedLogLevel", "0"), ("SlurmctldPidFile", "/run/slurmctld.pid"), ("SlurmctldPlugstack", NULL),
    ("SLURM_CONF", "/etc/slurm/slurm.conf"), ("SLURM_VERSION", SLURM_VERSION), ("SrunEpilog", NULL),
    ("SrunPortRange", "0-0"), ("SrunProlog", NULL), ("StateSaveLocation", "/var/spool/slurmctld"),
    ("SuspendExcNodes", NULL), ("SuspendExcParts", NULL), ("SuspendProgram", NULL),
    ("SuspendRate", "60 nodes/min"), ("SuspendTime", "INFINITE"), ("SuspendTimeout", "30 sec"),
    ("SwitchParameters", NULL), ("SwitchType", "switch/none"), ("TaskEpilog", NULL), ("TaskPlugin", "task/none"),
    ("TaskPluginParam", "(null type)"), ("TaskProlog", NULL), ("TCPTimeout", "2 sec"), ("TmpFS", "/tmp"),
    ("TopologyParam", NULL), ("TopologyPlugin", "topology/none"), ("TrackWCKey", "No"), ("TreeWidth", "50"),
    ("UsePam", "No"), ("UnkillableStepProgram", NULL), ("UnkillableStepTimeout", "60 sec"),
    ("VSizeFactor", "0 percent"), ("WaitTime", "0 sec"), ("X11Parameters", NULL),
)
CONFIG_KEYS = tuple(key for key, _ in _CONFIG_ROWS)


def show_config(settings: Mapping[str, object], *, now: float, controller: str = "localhost") -> str:
    """`scontrol show config`: `Configuration data as of TIME`, the `Key = Value` rows (`%-23s = %s`),
    a blank line and the controller's ping line.

    Args:
        settings: values by Slurm's key, overriding the defaults (e.g. ClusterName, BOOT_TIME as
            Slurm's time text, NEXT_JOB_ID, PriorityWeightAge, PriorityMaxAge); a key Slurm does
            not print is ignored, so the rows stay Slurm's.
        controller: the host named in `Slurmctld(primary) at HOST is UP`.
    """
    rows = [f"Configuration data as of {local_time(now)}\n"]
    for key, value in _CONFIG_ROWS:
        shown = settings.get(key, value)
        rows.append(f"{key:<23} = {'' if shown is None else shown}\n")
    rows.append(f"\nSlurmctld(primary) at {controller} is UP\n")
    return "".join(rows)
