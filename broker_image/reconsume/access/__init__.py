"""Access control compatible with Apache RocketMQ's plain ACL, shared by the broker and the name
server: accounts and their permissions (:mod:`.acl`), address whitelists (:mod:`.addresses`),
permissions and resources (:mod:`.perms`), and the guard a server puts in front of its handlers
(:mod:`.guard`). What each request code needs is the server's own table (the broker's
``reconsume.broker.acl_resources``, the name server's ``reconsume.namesrv.access``)."""
