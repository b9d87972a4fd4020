#!/bin/sh
# Slurm epilog: tell the corral server that a job ended, so it shows at once instead of at
# the next poll. Install it as `EpilogSlurmctld=` (runs once, on the controller) or `Epilog=`
# (runs on each compute node) in slurm.conf, and describe the server in /etc/corral/epilog.env
# (or the file $CORRAL_EPILOG_ENV names):
#
#   CORRAL_URL=http://login01:8765
#   CORRAL_TOKEN_FILE=/home/corral/.corral/webhook.token     # readable by the user Slurm runs this as
#
# It never fails and never waits long: an epilog that fails would drain the node.
env_file="${CORRAL_EPILOG_ENV:-/etc/corral/epilog.env}"
[ -r "$env_file" ] || exit 0
CORRAL_URL=$(sed -n 's/^CORRAL_URL=//p' "$env_file" | tail -n 1)
CORRAL_TOKEN_FILE=$(sed -n 's/^CORRAL_TOKEN_FILE=//p' "$env_file" | tail -n 1)
[ -n "$CORRAL_URL" ] && [ -r "$CORRAL_TOKEN_FILE" ] || exit 0
token=$(head -n 1 "$CORRAL_TOKEN_FILE")
# the job id only: the server reads what happened from Slurm itself
curl -s -o /dev/null --max-time 2 -X POST -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/json' --data "{\"slurm_job_id\": \"${SLURM_JOB_ID:-}\"}" \
  "$CORRAL_URL/api/v1/webhooks/slurm" >/dev/null 2>&1 || true
exit 0
