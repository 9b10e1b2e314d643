"""A view's work in the Django style: sign a user up and enqueue the welcome mail through the
process's ledger; run as a script it prints the job's id.

    python signup.py USER_ID
"""

from __future__ import annotations

import sys
from uuid import UUID

from jobs import get_ledger, send_welcome


def sign_up(user_id: int) -> UUID:
    enqueued = send_welcome.enqueue(get_ledger(), user_id=user_id)
    assert enqueued.job_id is not None
    return enqueued.job_id


if __name__ == "__main__":
    assert get_ledger() is get_ledger()  # one ledger per process
    print(sign_up(int(sys.argv[1])))
