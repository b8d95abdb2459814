"""Side effects done once, whatever clears or retries the task, through the ledger's outbox:

* :mod:`.publish`: :class:`PublishOperator`, the run's items as one publication (your templates);
* :mod:`.item_effects`: :class:`ItemEffectOperator`, one effect per item (subclass it);
* :mod:`.archive`: :class:`ArchiveOperator`, each item's file moved out of the inbox.
"""
