"""Storage event messages exactly as AWS, GCS and Azure document them, for the queue sources'
tests: S3 event notifications (direct, SNS-wrapped, EventBridge), S3's test event, Event Grid
BlobCreated (its own schema and CloudEvents') as a storage queue holds it, and Cloud Storage's
Pub/Sub notifications."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

KEY = "sales/_delta_log/00000000000000000001.json"


def s3_event(
    bucket: str = "lake", key: str = KEY, name: str = "ObjectCreated:Put"
) -> dict[str, Any]:
    """An S3 event notification as AWS documents it (notification-content-structure)."""
    return {
        "Records": [
            {
                "eventVersion": "2.1",
                "eventSource": "aws:s3",
                "awsRegion": "us-west-2",
                "eventTime": "1970-01-01T00:00:00.000Z",
                "eventName": name,
                "userIdentity": {"principalId": "AIDAJDPLRKLG7UEXAMPLE"},
                "requestParameters": {"sourceIPAddress": "127.0.0.1"},
                "responseElements": {
                    "x-amz-request-id": "C3D13FE58DE4C810",
                    "x-amz-id-2": "FMyUVURIY8/IgAtTv8xRjskZQpcIZ9KG4V5Wp6S7S/JRWeUWerMUE5Jg",
                },
                "s3": {
                    "s3SchemaVersion": "1.0",
                    "configurationId": "testConfigRule",
                    "bucket": {
                        "name": bucket,
                        "ownerIdentity": {"principalId": "A3NL1KOZZKExample"},
                        "arn": f"arn:aws:s3:::{bucket}",
                    },
                    "object": {
                        "key": key,
                        "size": 1024,
                        "eTag": "d41d8cd98f00b204e9800998ecf8427e",
                        "sequencer": "0055AED6DCD90281E5",
                    },
                },
            }
        ]
    }


def sns(message: Mapping[str, Any]) -> dict[str, Any]:
    """An SNS notification as SQS receives it (without raw message delivery)."""
    return {
        "Type": "Notification",
        "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
        "TopicArn": "arn:aws:sns:us-west-2:123456789012:lake-events",
        "Subject": "Amazon S3 Notification",
        "Message": json.dumps(message),
        "Timestamp": "2012-05-02T00:54:06.655Z",
        "SignatureVersion": "1",
        "Signature": "EXAMPLEw6JRN...",
        "SigningCertURL": "https://sns.us-west-2.amazonaws.com/SimpleNotificationService-f3.pem",
        "UnsubscribeURL": "https://sns.us-west-2.amazonaws.com/?Action=Unsubscribe",
    }


def eventbridge(
    bucket: str = "lake", key: str = KEY, kind: str = "Object Created"
) -> dict[str, Any]:
    """An S3 event as EventBridge sends it to an SQS target (ev-events.html)."""
    return {
        "version": "0",
        "id": "17793124-05d4-b198-2fde-7ededc63b103",
        "detail-type": kind,
        "source": "aws.s3",
        "account": "111122223333",
        "time": "2021-11-12T00:00:00Z",
        "region": "ca-central-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {
                "key": key,
                "size": 5,
                "etag": "b1946ac92492d2347c6235b4d2611184",
                "sequencer": "617f08299329d189",
            },
            "request-id": "N4N7GDK58NMKJ12R",
            "requester": "123456789012",
            "source-ip-address": "1.2.3.4",
            "reason": "PutObject",
        },
    }


TEST_EVENT = {
    "Service": "Amazon S3",
    "Event": "s3:TestEvent",
    "Time": "2014-10-13T15:57:02.089Z",
    "Bucket": "lake",
    "RequestId": "5582815E1AEA5ADF",
    "HostId": "8cLeGAmw098X5cv4Zkwcmo8vvZa3eH3eKxsPzbB9wrR+YstdA6Knx4Ip8EXAMPLE",
}


def blob_created(container: str = "lake", name: str = KEY, cloud: bool = False) -> dict[str, Any]:
    """An Event Grid BlobCreated event (event-schema-blob-storage), or its CloudEvents form."""
    subject = f"/blobServices/default/containers/{container}/blobs/{name}"
    data = {
        "api": "PutBlockList",
        "clientRequestId": "6d79dbfb-0e37-4fc4-981f-442c9ca65760",
        "requestId": "831e1650-001e-001b-66ab-eeb76e000000",
        "eTag": "0x8D4BCC2E4835CD0",
        "contentType": "application/octet-stream",
        "contentLength": 524288,
        "blobType": "BlockBlob",
        "url": f"https://acct.blob.core.windows.net/{container}/{name}",
        "sequencer": "00000000000004420000000000028963",
        "storageDiagnostics": {"batchId": "b68529f3-68cd-4744-baa4-3c0498ec19f0"},
    }
    account = "/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/acct"
    if cloud:
        return {
            "source": account,
            "subject": subject,
            "type": "Microsoft.Storage.BlobCreated",
            "time": "2017-06-26T18:41:00.9584103Z",
            "id": "831e1650-001e-001b-66ab-eeb76e069631",
            "data": data,
            "specversion": "1.0",
        }
    return {
        "topic": account,
        "subject": subject,
        "eventType": "Microsoft.Storage.BlobCreated",
        "eventTime": "2017-06-26T18:41:00.9584103Z",
        "id": "831e1650-001e-001b-66ab-eeb76e069631",
        "data": data,
        "dataVersion": "",
        "metadataVersion": "1",
    }


def queue_text(event: Any) -> str:
    """What Event Grid writes into a storage queue: the event's JSON in base64."""
    return base64.b64encode(json.dumps(event).encode()).decode()


def gcs_message(
    bucket: str = "lake", name: str = KEY, kind: str = "OBJECT_FINALIZE"
) -> dict[str, Any]:
    """A Cloud Storage Pub/Sub notification (pubsub-notifications), JSON_API_V1 payload."""
    resource = {"kind": "storage#object", "name": name, "bucket": bucket, "generation": "1"}
    return {
        "data": base64.b64encode(json.dumps(resource).encode()).decode(),
        "attributes": {
            "notificationConfig": f"projects/_/buckets/{bucket}/notificationConfigs/1",
            "eventType": kind,
            "payloadFormat": "JSON_API_V1",
            "bucketId": bucket,
            "objectId": name,
            "objectGeneration": "1700000000000000",
            "eventTime": "2026-12-06T00:00:00.000000Z",
        },
        "messageId": "1",
        "publishTime": "2026-12-06T00:00:00.100Z",
    }
